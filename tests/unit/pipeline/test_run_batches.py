"""``LocalPipeline.run`` takes events in batches: the same deltas, rankings and counts as ``feed`` one by one;
``feed_batch`` refuses the runs it cannot serve, and ``run(batch=1)`` yields each delta at its event."""

from __future__ import annotations

import pytest

from producers.registry import open_trace
from streams.core.events import Event, TaskStart
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.local import LocalPipeline
from streams.settings import Settings


def trace() -> list[Event]:
    events = list(open_trace("synthetic:nodes=40,slow=3,jobs=150,seed=3"))
    # Invalid events among them: counted as dead letters by either path, never ranked.
    events.insert(500, TaskStart("bad", "t", 0, "node-01", -5))
    events.insert(9000, TaskStart("", "t", 0, "node-02", events[9000].ts_us))
    events.insert(7000, TaskStart("j", "t", 0, "", events[7000].ts_us))  # a node named "" is never ranked
    return events


def one_by_one(events: list[Event], partitions: int, finish: bool,
               policy: str) -> tuple[list[str], list[str], LocalPipeline]:
    rankings: list[str] = []
    pipeline = LocalPipeline(Settings(policy=policy), partitions=partitions,
                             on_ranking=lambda r: rankings.append(repr(r)))
    deltas = [d for event in events for d in pipeline.feed(event)]
    if finish:
        deltas += pipeline.finish()
    return rankings, [repr(d) for d in deltas], pipeline


def batched(events: list[Event], partitions: int, finish: bool,
            policy: str) -> tuple[list[str], list[str], LocalPipeline]:
    rankings: list[str] = []
    pipeline = LocalPipeline(Settings(policy=policy), partitions=partitions,
                             on_ranking=lambda r: rankings.append(repr(r)))
    deltas = list(pipeline.run(iter(events), finish=finish))
    return rankings, [repr(d) for d in deltas], pipeline


# pcores ranks on per-partition summaries; shift learns from every sample.
@pytest.mark.parametrize("policy", ["pcores", "shift"])
@pytest.mark.parametrize(("partitions", "finish"), [(1, True), (3, True), (3, False)])
def test_batches_publish_what_single_events_publish(partitions: int, finish: bool, policy: str) -> None:
    events = trace()
    rankings, deltas, single = one_by_one(events, partitions, finish, policy)
    batch_rankings, batch_deltas, many = batched(events, partitions, finish, policy)
    assert len(rankings) > 10 and len(deltas) >= 2  # a trace that ranks and lists
    assert batch_rankings == rankings
    assert batch_deltas == deltas
    assert many.counts == single.counts
    assert many.counts.invalid == {"negative ts_us": 1, "empty job_id or task_id": 1, "empty node_id": 1}
    assert many.blacklist == single.blacklist


@pytest.mark.parametrize("make", [
    lambda: LocalPipeline(Settings(policy="running")),  # its detector observes running tasks
    lambda: LocalPipeline(Settings(policy="pcores"), predictor=PredictorFleet("select", PredictionContext())),
], ids=["observing detector", "predictor"])
def test_feed_batch_refuses_what_it_would_leave_unseen(make) -> None:
    pipeline = make()
    events = trace()[:200]
    with pytest.raises(ValueError, match="one event at a time"):
        pipeline.feed_batch(events)
    assert pipeline.counts.events == 0  # nothing taken
    single = make()  # run takes them one at a time instead
    one_at_a_time = [repr(d) for e in events for d in single.feed(e)]
    assert [repr(d) for d in pipeline.run(iter(events), finish=False)] == one_at_a_time


def test_run_with_batch_1_yields_each_delta_before_pulling_the_next_event() -> None:
    events = trace()
    pulled = 0

    def live():  # a source that counts what it has handed over
        nonlocal pulled
        for event in events:
            pulled += 1
            yield event

    pulls_at_delta = [pulled for _ in LocalPipeline(Settings(policy="pcores")).run(live(), finish=False, batch=1)]
    probe = LocalPipeline(Settings(policy="pcores"))  # two deltas on this trace (the running policy: one)
    expected = [i + 1 for i, event in enumerate(events) for _ in probe.feed(event)]  # the event causing each delta
    assert len(expected) >= 2
    assert pulls_at_delta == expected  # each delta right after the event that caused it
