"""The ranking's first boundary is a function of the data, not of how progress marks and records arrive.

A Kafka worker's ranking reads every normalising partition's records and marks interleaved on the single
``ranking-feed`` partition, in an order the brokers and the workers' speeds decide; the in-process runner
interleaves them in trace order, with whatever partition count it is given. Which boundaries get a ranking at
all, and so the running detector's "N consecutive looks", must be the same in every case.
"""

from __future__ import annotations

import functools
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producers.registry import open_trace
from streams.config import job_idle_timeout_us, partition_for, ranking_config
from streams.core.events import (
    Event,
    NodeMoments,
    NodeSummary,
    NormalizedTask,
    Progress,
    TaskCheckpoint,
    TaskFinish,
    TaskStart,
    validate,
)
from streams.core.ranker import learns_from_samples, watches_tasks
from streams.core.ranking_config import RankingConfig
from streams.core.stages import Emitted, NormalizeStage, RankResult, RankStage, boundary_at_or_before
from streams.local import LocalPipeline
from streams.settings import Settings

# 1.5 h of a 20-node cluster, two nodes 3x slow: both policies list them, so rankings and deltas are compared.
TRACE = "synthetic:nodes=20,slow=2,jobs=60,tasks=10-20,interarrival=90,checkpoints=2,seed=1,slowdown=3"
POLICIES = ("pcores", "running")
PERIOD_S = 60  # a ranking a minute: the start shows at a finer grain than the default five
PARTITIONS = 3
Item = tuple[str, Any]  # ("add", summary or sample) | ("observe", (event, source)) | ("progress", mark)


def configured(policy: str) -> Settings:
    return Settings(policy=policy, ranking_period_s=PERIOD_S)


@functools.cache
def trace_events() -> list[Event]:
    return list(open_trace(TRACE))


@pytest.fixture(scope="module")
def events() -> list[Event]:
    return trace_events()


def _items(emitted: Emitted, samples: bool) -> list[Item]:
    records: list[Any] = list(emitted.samples if samples else emitted.summaries)
    return [("add", r) for r in records] + ([] if emitted.progress is None else [("progress", emitted.progress)])


def feed_streams(events: list[Event], policy: str, partitions: int) -> tuple[list[list[Item]], int]:
    """Each normalising partition's share of ``ranking-feed``, in its own order (forwarded task events before the
    marks they lead to, summaries before the marks past their boundary), ending with what ``flush`` sends at the
    end of the trace; and the time ``finish`` ranks up to."""
    setting = configured(policy)
    config = ranking_config(setting)
    watches, samples = watches_tasks(config), learns_from_samples(config)
    stages = [NormalizeStage(p, partitions, config.period_us, job_idle_timeout_us(setting),
                             window_us=config.window_size_us, summaries=not samples) for p in range(partitions)]
    streams: list[list[Item]] = [[] for _ in range(partitions)]
    last = -1
    for event in events:
        if validate(event) is not None:
            continue
        p, last = partition_for(event.job_id, partitions), max(last, event.ts_us)
        if watches and isinstance(event, TaskStart | TaskCheckpoint | TaskFinish):
            streams[p].append(("observe", (event, (f"task-events:{p}", len(streams[p])))))
        streams[p] += _items(stages[p].process(event), samples)
    for p, stage in enumerate(stages):
        streams[p] += _items(stage.flush()._replace(progress=None), samples)
    return streams, boundary_at_or_before(last, config.period_us) + config.period_us


def interleave(streams: list[list[Item]], rng: random.Random) -> list[Item]:
    """One arrival order on ranking-feed: each partition's items in its order, the partitions taking turns in runs
    of random length, some partitions far more often than others (a fast normaliser runs ahead)."""
    weights = [rng.choice((1, 3, 20)) for _ in streams]
    at, out = [0] * len(streams), []
    while live := [p for p, stream in enumerate(streams) if at[p] < len(stream)]:
        (p,) = rng.choices(live, [weights[q] for q in live])
        run = rng.choice((1, 5, 50, 500))
        out += streams[p][at[p]:at[p] + run]
        at[p] += run
    return out


def rank(items: list[Item], policy: str, partitions: int, end: int, cut: int | None = None) -> list[RankResult]:
    """What a ranking makes of one arrival order, then ``finish(end)``; with ``cut``, restarted from its checkpoint
    (through JSON, as a worker stores it) after ``cut`` items."""
    stage, results = RankStage(ranking_config(configured(policy)), partitions), []
    for i, (kind, value) in enumerate(items):
        if i == cut:
            state = json.loads(json.dumps(stage.snapshot()))
            stage = RankStage(stage.config, partitions)
            stage.restore(state)
        if kind == "progress":
            results += stage.progress(value)
        elif kind == "observe":
            stage.observe(*value)
        else:
            stage.add(value)
    return results + stage.finish(end)


def boundaries(results: list[RankResult]) -> list[int]:
    return [r.boundary_us for r in results]


@functools.cache
def fed(policy: str) -> tuple[list[list[Item]], int, list[RankResult]]:
    """The partitions' streams under ``policy``, the end, and what one interleaving of them ranks."""
    streams, end = feed_streams(trace_events(), policy, PARTITIONS)
    return streams, end, rank(interleave(streams, random.Random(0)), policy, PARTITIONS, end)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=15, deadline=None)
@given(order=st.integers(0, 2**32 - 1), cut=st.one_of(st.none(), st.integers(0, 10**6)))
def test_any_arrival_order_ranks_the_same_boundaries_the_same_way(policy: str, order: int,
                                                                   cut: int | None) -> None:
    streams, end, expected = fed(policy)
    items = interleave(streams, random.Random(order))
    results = rank(items, policy, PARTITIONS, end, None if cut is None else cut % len(items))
    assert boundaries(results) == boundaries(expected)
    assert results == expected  # each boundary's ranking (statistics, evidence, verdicts, reasons) and delta
    assert any(r.delta is not None for r in results), "the trace makes the ranking list its slow nodes"


@pytest.mark.parametrize("policy", POLICIES)
def test_the_in_process_runner_ranks_the_same_boundaries_with_1_or_4_partitions(
    events: list[Event], policy: str,
) -> None:
    def ranked(partitions: int) -> list[RankResult]:
        results: list[RankResult] = []
        list(LocalPipeline(configured(policy), partitions=partitions, on_ranking=results.append).run(events))
        return results

    one, four = ranked(1), ranked(4)
    assert boundaries(one) == boundaries(four)
    first_data = min(e.ts_us for e in events) if policy == "running" else None
    if first_data is not None:  # the running detector sees every task event: it looks from the first one on
        assert boundaries(one)[0] == boundary_at_or_before(first_data, PERIOD_S * 10**6) + PERIOD_S * 10**6


def test_the_in_process_runner_ranks_as_a_worker_fed_its_partitions_in_trace_order(events: list[Event]) -> None:
    """The streams above are what a worker's ranking reads; the runner interleaves them in trace order."""
    for policy in POLICIES:
        results: list[RankResult] = []
        list(LocalPipeline(configured(policy), partitions=PARTITIONS, on_ranking=results.append).run(events))
        assert results == fed(policy)[2], policy


def test_a_sample_fed_ranking_starts_at_the_boundary_after_its_first_value() -> None:
    """No summaries, no forwarded events: the first sample's emission time decides, whatever the marks said."""
    minute = 60_000_000
    stage = RankStage(RankingConfig(period_us=minute), partitions=2)
    assert stage.progress(Progress(0, 2, 1 * minute)) == []
    assert stage.progress(Progress(1, 2, 2 * minute)) == []  # no data before the watermark: nothing to start from
    stage.add(NormalizedTask("j", "t", 0, "n1", 3 * minute, 30_000_000, 0.5, emitted_us=int(4.5 * minute)))
    assert stage.progress(Progress(0, 2, 6 * minute)) == []
    assert boundaries(stage.progress(Progress(1, 2, 7 * minute))) == [5 * minute, 6 * minute]


def test_a_ranking_restored_before_its_start_keeps_the_earliest_forwarded_event() -> None:
    """The first forwarded event may come long before a summary; a checkpoint taken in between must keep it, or
    the restarted ranking starts later than the uninterrupted one (the feed is read again after the checkpoint)."""
    minute = 60_000_000

    def first_ranked(restart: bool) -> int:
        stage = RankStage(RankingConfig(policy="running", period_us=minute), partitions=1)
        stage.observe(TaskStart("j", "t", 0, "n1", int(1.5 * minute)), ("task-events:0", 0))
        if restart:
            state = json.loads(json.dumps(stage.snapshot()))
            stage = RankStage(stage.config, partitions=1)
            stage.restore(state)
        return boundaries(stage.progress(Progress(0, 1, 5 * minute)))[0]

    assert first_ranked(restart=True) == first_ranked(restart=False) == 2 * minute


def test_a_forwarded_event_a_ranking_does_not_watch_does_not_start_it() -> None:
    """Normalisers still forwarding under a rolling change away from ``running``: the events are not this ranking's
    data (its detector ignores them), so its first boundary is still its first summary's."""
    minute = 60_000_000
    stage = RankStage(RankingConfig(policy="pcores", period_us=minute), partitions=1)
    stage.observe(TaskStart("j", "t", 0, "n1", int(0.5 * minute)), ("task-events:0", 0))
    stage.add(NodeSummary(0, 1, 4 * minute, minute, (NodeMoments("n1", 3 * minute, 1, 0.5, 0.0),), ()))
    assert boundaries(stage.progress(Progress(0, 1, 5 * minute))) == [4 * minute, 5 * minute]
