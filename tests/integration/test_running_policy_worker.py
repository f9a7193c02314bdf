"""``LAGGARD_POLICY=running laggard worker`` (issue 21's running-task detector) on a real broker, both engines: the
normalisers forward the task events to the ranking, which lists the slow nodes exactly as ``laggard run --policy
running`` does on the same trace; a direct worker killed mid-replay ends as the clean run. Before the forwarding
the worker listed nothing, without a word."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from producers.registry import open_trace
from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    TaskCheckpoint,
    TaskFinish,
    TaskRows,
    TaskStart,
)
from streams.kafka_clients import read_to_end
from streams.serde import codec
from streams.settings import Settings
from tests.integration.operations.support import (
    assert_same_end,
    clean_run,
)
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for
from tests.integration.test_direct_engine import killed_a_third_in_and_restarted
from tests.integration.test_stream_pipeline import PARTITIONS, in_process

# 75 min of a 40-node cluster with checkpoints and failed attempts; three nodes turn 1.8x slow at 40 min.
SPEC = "synthetic:nodes=40,slow=3,jobs=150,checkpoints=2,fail=0.05,onset=2400,seed=1"
EVENTS = 24_988  # in SPEC
TASK_RECORDS = (TaskStart, TaskCheckpoint, TaskFinish)
POLICY = {"LAGGARD_POLICY": "running", "LAGGARD_RANKING_PERIOD_S": "60"}  # what the worker and the expectation read


@pytest.fixture(autouse=True)
def running_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in POLICY.items():
        monkeypatch.setenv(name, value)  # the worker subprocesses inherit them


@pytest.fixture(scope="module")
def expected() -> Iterator[tuple[list[BlacklistDelta], BlacklistSnapshot, dict]]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in POLICY.items():
            patch.setenv(name, value)
        yield in_process(SPEC)  # `laggard run --policy running --period 60`, live (finish=False), 4 partitions


def forwarded_places(feed: Iterable[Any]) -> set[tuple[str, int]]:
    """The (source partition, offset) of every task event forwarded in ``TaskRows`` records on ranking-feed."""
    return {(record.source, offset) for record in (codec.decode(r.value) for r in feed)
            if isinstance(record, TaskRows) for offset in record.offsets}


@pytest.mark.parametrize("engine", ["faust", "direct"])
def test_a_running_policy_worker_lists_the_slow_nodes_as_the_in_process_runner_does(
    engine: str, tmp_path: Path, expected: tuple[list[BlacklistDelta], BlacklistSnapshot, dict]
) -> None:
    local_deltas, local_final, truth = expected
    assert sorted(local_final.node_ids) == truth["slow_nodes"], "the in-process runner finds them on this trace"
    tasks = sum(isinstance(e, TASK_RECORDS) for e in open_trace(SPEC))
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        settings = Settings(bootstrap_servers=bootstrap)
        with running_worker(bootstrap, tmp_path, log, "--engine", engine, "--partitions", str(PARTITIONS)):
            replay(bootstrap, SPEC)
            snapshots = wait_for(lambda: decoded(bootstrap, "blacklist-snapshot"),
                                 lambda ss: bool(ss) and ss[-1].version >= local_final.version, 150,
                                 "the final snapshot", log)
            # The final version is ranked at 54 min of the trace's 107: the normalisers may still be forwarding the
            # rest when it is out, and the stop would cut that short
            wait_for(lambda: forwarded_places(read_to_end(settings, "ranking-feed")),
                     lambda places: len(places) >= tasks, 150, "every task event forwarded to the ranking", log)
        deltas = decoded(bootstrap, "blacklist-deltas")
        feed = list(read_to_end(settings, "ranking-feed"))
    records = [codec.decode(r.value) for r in feed]
    batches = [r for r in records if isinstance(r, TaskRows)]
    forwarded = [(b.source, offset) for b in batches for offset in b.offsets]
    # each task event forwarded with its own place (a start-up rebalance may forward a stretch again: dropped), in
    # rows records: far fewer feed records than task events
    assert not any(isinstance(r, TASK_RECORDS) for r in records), "no task event forwarded alone"
    assert len(set(forwarded)) == tasks and len(batches) < tasks / 10
    assert sorted(e.node_id for d in deltas for e in d.added) == truth["slow_nodes"]
    assert deltas == local_deltas, "the same deltas: versions, entries, their statistics and reasons"
    assert snapshots[-1] == local_final
    assert "Traceback" not in log.read_text(errors="replace")


def test_a_running_policy_direct_worker_killed_mid_replay_ends_as_the_clean_run(tmp_path: Path) -> None:
    """SIGKILL once a third of the trace was read and a checkpoint committed; the restarted worker's normalisers
    forward again what they forwarded since their checkpoints, which the ranking drops: the deltas, the final
    snapshot and every node's statistics in every window are the uninterrupted run's."""
    clean = clean_run(SPEC)
    assert clean.snapshot.node_ids, "the clean run lists nodes"
    published, text = killed_a_third_in_and_restarted(tmp_path, SPEC, EVENTS, 1000, clean, wait_s=120)
    assert "resumes from its checkpoint" in text, "the restart used the checkpoints"
    assert "forwarded to the ranking again" in text, "the restart forwarded a stretch again, and it was dropped"
    assert_same_end(published, clean)
