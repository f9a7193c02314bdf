"""The deltas depend on the trace alone, not on how Kafka happens to interleave what it delivers.

Within a partition, task-events and job-events are two topics that arrive in any interleaving that keeps
each topic's own order; at the ranking, the partitions' outputs arrive in any interleaving that keeps each
partition's order. Every such arrival order must publish the deltas of the plain in-order run (the
in-process runner, which counts the job stream from its first event instead of waiting for it).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from producers.registry import open_trace
from streams.core.events import BlacklistDelta, JobFinish, JobStart, Progress
from streams.core.stages import NormalizeStage, RankStage
from streams.local import LocalPipeline, partition_for, ranking_config
from streams.settings import Settings

SPEC = "synthetic:nodes=30,slow=2,jobs=160,seed=5"
PARTITIONS = 3
SETTINGS = Settings()
EVENTS = list(open_trace(SPEC))


def shuffle_keeping_order(rng: random.Random, streams: Sequence[list[Any]]) -> list[Any]:
    """One random interleaving of several sequences, each kept in its own order."""
    cursors = [0] * len(streams)
    out: list[Any] = []
    while True:
        open_streams = [i for i, stream in enumerate(streams) if cursors[i] < len(stream)]
        if not open_streams:
            return out
        # Bursty, like fetches: take a run of up to 200 records from one stream.
        i = rng.choice(open_streams)
        take = rng.randint(1, 200)
        out.extend(streams[i][cursors[i]:cursors[i] + take])
        cursors[i] += take


def deltas_for_arrival(seed: int) -> list[tuple[int, list[str], list[str]]]:
    rng = random.Random(seed)
    config = ranking_config(SETTINGS)
    idle = round(SETTINGS.job_idle_timeout_s * 1_000_000)
    outputs: list[list[Any]] = []
    for p in range(PARTITIONS):
        mine = [e for e in EVENTS if partition_for(e.job_id, PARTITIONS) == p]
        tasks = [e for e in mine if not isinstance(e, JobStart | JobFinish)]
        jobs = [e for e in mine if isinstance(e, JobStart | JobFinish)]
        stage = NormalizeStage(p, PARTITIONS, config.period_us, idle, wait_for_job_events=True)  # as Kafka
        produced: list[Any] = []
        for event in shuffle_keeping_order(rng, [tasks, jobs]):
            samples, progress = stage.process(event)
            produced.extend(samples)
            if progress is not None:
                produced.append(progress)
        outputs.append(produced)
    rank = RankStage(config, PARTITIONS)
    deltas: list[BlacklistDelta] = []
    for record in shuffle_keeping_order(rng, outputs):
        results = rank.progress(record) if isinstance(record, Progress) else rank.add(record)
        deltas.extend(r.delta for r in results or () if r.delta is not None)
    return summary(deltas)


def summary(deltas: list[BlacklistDelta]) -> list[tuple[int, list[str], list[str]]]:
    return [(d.version, sorted(e.node_id for e in d.added), sorted(e.node_id for e in d.removed)) for d in deltas]


REFERENCE = summary(list(LocalPipeline(SETTINGS, partitions=PARTITIONS).run(iter(EVENTS), finish=False)))


def test_the_reference_run_finds_the_slow_nodes() -> None:
    truth = open_trace(SPEC)
    list(truth)
    added = {node for _, nodes, _ in REFERENCE for node in nodes}
    assert added == set(truth.ground_truth["slow_nodes"])


@settings(max_examples=12, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_any_arrival_order_publishes_the_same_deltas(seed: int) -> None:
    assert deltas_for_arrival(seed) == REFERENCE
