"""``LocalPipeline.run`` takes events in batches: the same deltas, rankings and counts as ``feed`` one by one."""

from __future__ import annotations

import pytest

from producers.registry import open_trace
from streams.core.events import Event, TaskStart
from streams.local import LocalPipeline
from streams.settings import Settings


def trace() -> list[Event]:
    events = list(open_trace("synthetic:nodes=40,slow=3,jobs=150,seed=3"))
    # Invalid events among them: counted as dead letters by either path, never ranked.
    events.insert(500, TaskStart("bad", "t", 0, "node-01", -5))
    events.insert(9000, TaskStart("", "t", 0, "node-02", events[9000].ts_us))
    return events


def one_by_one(events: list[Event], partitions: int, finish: bool) -> tuple[list[str], list[str], LocalPipeline]:
    rankings: list[str] = []
    pipeline = LocalPipeline(Settings(), partitions=partitions, on_ranking=lambda r: rankings.append(repr(r)))
    deltas = [d for event in events for d in pipeline.feed(event)]
    if finish:
        deltas += pipeline.finish()
    return rankings, [repr(d) for d in deltas], pipeline


def batched(events: list[Event], partitions: int, finish: bool) -> tuple[list[str], list[str], LocalPipeline]:
    rankings: list[str] = []
    pipeline = LocalPipeline(Settings(), partitions=partitions, on_ranking=lambda r: rankings.append(repr(r)))
    deltas = list(pipeline.run(iter(events), finish=finish))
    return rankings, [repr(d) for d in deltas], pipeline


@pytest.mark.parametrize(("partitions", "finish"), [(1, True), (3, True), (3, False)])
def test_batches_publish_what_single_events_publish(partitions: int, finish: bool) -> None:
    events = trace()
    rankings, deltas, single = one_by_one(events, partitions, finish)
    batch_rankings, batch_deltas, many = batched(events, partitions, finish)
    assert len(rankings) > 10 and len(deltas) >= 2  # a trace that ranks and lists
    assert batch_rankings == rankings
    assert batch_deltas == deltas
    assert many.counts == single.counts
    assert many.counts.invalid == {"negative ts_us": 1, "empty job_id or task_id": 1}
    assert many.blacklist == single.blacklist
