"""The Faust pipeline on a real broker: slow nodes found, parity with the in-process runner, crash recovery."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from producers.registry import open_trace
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from streams.local import LocalPipeline
from streams.settings import Settings
from tests.integration.support import (
    decoded,
    fresh_broker,
    replay,
    running_worker,
    start_worker,
    stop_worker,
    wait_for,
    wait_for_worker_topics,
)

SPEC = "synthetic:nodes=40,slow=3,jobs=300,seed=3"
PARTITIONS = 4


def in_process(spec: str) -> tuple[list[BlacklistDelta], BlacklistSnapshot, dict]:
    """What the in-process runner publishes for the same trace and partition count, as a live worker would."""
    trace = open_trace(spec)
    pipeline = LocalPipeline(Settings(), partitions=PARTITIONS)
    deltas = list(pipeline.run(trace, finish=False))
    return deltas, pipeline.blacklist, trace.ground_truth


def summary(deltas: list[BlacklistDelta]) -> list[tuple[int, list[str], list[str]]]:
    return [(d.version, sorted(e.node_id for e in d.added), sorted(e.node_id for e in d.removed)) for d in deltas]


@pytest.fixture(scope="module")
def expected() -> tuple[list[BlacklistDelta], BlacklistSnapshot, dict]:
    return in_process(SPEC)


def test_worker_blacklists_the_injected_slow_nodes_and_matches_the_in_process_runner(
    tmp_path: Path, expected: tuple[list[BlacklistDelta], BlacklistSnapshot, dict]
) -> None:
    local_deltas, _, truth = expected
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        with running_worker(bootstrap, tmp_path, log, "--partitions", str(PARTITIONS)):
            replay(bootstrap, SPEC)
            deltas = wait_for(lambda: decoded(bootstrap, "blacklist-deltas"),
                              lambda ds: len(ds) >= len(local_deltas), 180, "the deltas", log)
        snapshots = decoded(bootstrap, "blacklist-snapshot")

    added = {entry.node_id for delta in deltas for entry in delta.added}
    assert added == set(truth["slow_nodes"]), "exactly the injected slow nodes are blacklisted"
    for delta in deltas:
        for entry in delta.added:
            assert entry.n >= 5 and entry.ci_low is not None, entry  # the window statistics travel with it
            # the default policy (running) says which evidence listed the node, in words
            assert "clearly slow over" in entry.reason and "job std behind" in entry.reason, entry.reason
    assert summary(deltas) == summary(local_deltas), "Kafka and in-process publish the same deltas"
    assert [s.version for s in snapshots] == [d.version for d in deltas]
    assert snapshots[-1].node_ids == frozenset(truth["slow_nodes"])


def test_a_worker_killed_mid_replay_resumes_to_the_same_final_snapshot(
    tmp_path: Path, expected: tuple[list[BlacklistDelta], BlacklistSnapshot, dict]
) -> None:
    local_deltas, local_final, _ = expected
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        replay(bootstrap, SPEC)  # the whole trace waits in task-events; the worker is killed half-way through it
        first = start_worker(bootstrap, tmp_path, log, "--partitions", str(PARTITIONS))
        try:
            wait_for(lambda: decoded(bootstrap, "blacklist-deltas"), lambda ds: len(ds) >= 1, 180,
                     "the first delta", log)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        with running_worker(bootstrap, tmp_path, log, "--partitions", str(PARTITIONS)):
            snapshots = wait_for(lambda: decoded(bootstrap, "blacklist-snapshot"),
                                 lambda ss: bool(ss) and ss[-1].version >= local_final.version, 180,
                                 "the final snapshot", log)
        deltas = decoded(bootstrap, "blacklist-deltas")

    versions = [d.version for d in deltas]
    assert versions == sorted(set(versions)), f"versions went backwards or repeated: {versions}"
    assert summary(deltas) == summary(local_deltas)
    final = snapshots[-1]
    assert (final.version, final.node_ids) == (local_final.version, local_final.node_ids)
    assert [(e.node_id, e.n, e.mean, e.ci_low) for e in final.nodes] == [
        (e.node_id, e.n, e.mean, e.ci_low) for e in local_final.nodes
    ]


def test_bad_records_go_to_dead_letters_and_processing_goes_on(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap, running_worker(bootstrap, tmp_path, log):
        wait_for_worker_topics(bootstrap, log)  # else this producer may create task-events with 1 partition
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("task-events", key=b"job-x", value=b"not avro at all")
        from streams.core.events import Status, TaskFinish
        from streams.serde import codec

        producer.send("task-events", key=b"job-x",
                      value=codec.encode(TaskFinish("job-x", "t", 0, "n", 10, 20, Status.SUCCEEDED)))
        producer.close()  # flushes; a producer left open retries against the stopped broker after the test
        replay(bootstrap, "synthetic:nodes=40,slow=3,jobs=200,seed=2")
        letters = wait_for(lambda: decoded(bootstrap, "dead-letters"), lambda ls: len(ls) >= 2, 120,
                           "two dead letters", log)
        deltas = wait_for(lambda: decoded(bootstrap, "blacklist-deltas"), lambda ds: len(ds) >= 1, 180,
                          "a delta after the bad records", log)
    reasons = sorted(letter.reason for letter in letters)
    assert any("not Avro single-object encoding" in r for r in reasons), reasons
    assert any("finish before start" in r for r in reasons), reasons
    assert {letter.value for letter in letters} >= {b"not avro at all"}
    assert all(letter.source_topic == "task-events" for letter in letters)
    assert deltas[0].added, "valid records after the bad ones were processed"


def test_worker_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        process = start_worker(bootstrap, tmp_path, log)
        wait_for(lambda: log.read_text(errors="replace"), lambda text: "Worker ready" in text, 90,
                 "the worker to be ready", log)
        assert stop_worker(process) == 0, log.read_text()[-2000:]
