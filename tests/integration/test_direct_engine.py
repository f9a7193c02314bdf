"""The direct engine (`laggard worker --engine direct`, streams.engine) on a real broker: the same deltas and
final snapshot as the in-process runner (and so as the Faust worker, tests/integration/test_stream_pipeline.py),
dead letters like the agents', and a SIGKILL mid-replay that ends in the uninterrupted run's final snapshot."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from laggard import kafka_local
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from tests.integration.operations.support import (
    CommittedOffsets,
    assert_same_end,
    clean_run,
    counted,
    wait_until_settled,
)
from tests.integration.support import LAGGARD, decoded, fresh_broker, replay, running_worker, start_worker, wait_for
from tests.integration.test_stream_pipeline import PARTITIONS, SPEC, in_process, summary

EVENTS = 24_742  # in SPEC
RATE = 1000  # events per second: the replay lasts about 25 s, the kill comes in its first half
DIRECT = ("--engine", "direct", "--partitions", str(PARTITIONS))


@pytest.fixture(scope="module")
def expected() -> tuple[list[BlacklistDelta], BlacklistSnapshot, dict]:
    return in_process(SPEC)


def node_stats(snapshot: BlacklistSnapshot) -> list[tuple[str, int, float, float | None]]:
    return [(e.node_id, e.n, e.mean, e.ci_low) for e in snapshot.nodes]


def test_the_direct_worker_publishes_what_the_in_process_runner_does(
    tmp_path: Path, expected: tuple[list[BlacklistDelta], BlacklistSnapshot, dict]
) -> None:
    local_deltas, local_final, truth = expected
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        with running_worker(bootstrap, tmp_path, log, *DIRECT):
            replay(bootstrap, SPEC)
            snapshots = wait_for(lambda: decoded(bootstrap, "blacklist-snapshot"),
                                 lambda ss: bool(ss) and ss[-1].version >= local_final.version, 180,
                                 "the final snapshot", log)
        deltas = decoded(bootstrap, "blacklist-deltas")
        samples = decoded(bootstrap, "node-samples")

    assert {e.node_id for d in deltas for e in d.added} == set(truth["slow_nodes"])
    assert summary(deltas) == summary(local_deltas), "direct engine and in-process publish the same deltas"
    assert [s.version for s in snapshots] == [d.version for d in deltas]
    final = snapshots[-1]
    assert (final.version, final.node_ids) == (local_final.version, local_final.node_ids)
    assert node_stats(final) == node_stats(local_final)
    assert len({(s.job_id, s.task_id) for s in samples}) == len(samples), "each final z-value once"
    assert "Traceback" not in log.read_text(errors="replace")


def test_the_direct_worker_dead_letters_bad_records_as_the_agents_do(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    from streams.core.events import Status, TaskFinish
    from streams.serde import codec

    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap, running_worker(bootstrap, tmp_path, log, *DIRECT):
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("task-events", key=b"job-x", value=b"not avro at all")
        producer.send("task-events", key=b"job-x",
                      value=codec.encode(TaskFinish("job-x", "t", 0, "n", 10, 20, Status.SUCCEEDED)))
        producer.flush()
        replay(bootstrap, "synthetic:nodes=40,slow=3,jobs=200,seed=2")
        letters = wait_for(lambda: decoded(bootstrap, "dead-letters"), lambda ls: len(ls) >= 2, 120,
                           "two dead letters", log)
        deltas = wait_for(lambda: decoded(bootstrap, "blacklist-deltas"), lambda ds: len(ds) >= 1, 180,
                          "a delta after the bad records", log)
    reasons = sorted(letter.reason for letter in letters)
    assert len(letters) == 2, "each bad record once, though two stages read task-events"
    assert any("not Avro single-object encoding" in r for r in reasons), reasons
    assert any("finish before start" in r for r in reasons), reasons
    assert {(letter.source_topic, letter.key) for letter in letters} == {("task-events", b"job-x")}
    assert deltas[0].added, "valid records after the bad ones were processed"


def test_a_direct_worker_killed_mid_replay_ends_as_the_clean_run(tmp_path: Path) -> None:
    """SIGKILL once a third of the trace was read, a checkpoint committed, and the replay still sends; the
    restarted worker resumes from its checkpoints: the deltas, the final snapshot and every node's statistics in
    every window published are the uninterrupted run's."""
    clean = clean_run(SPEC)
    published, text = killed_a_third_in_and_restarted(tmp_path, SPEC, EVENTS, RATE, clean)

    assert "resumes from its checkpoint" in text, "the restart used the checkpoints"
    assert_same_end(published, clean)


def killed_a_third_in_and_restarted(tmp_path: Path, spec: str, events: int, rate: int, clean: Any,
                                    wait_s: float = 180) -> tuple[Any, str]:
    """A direct worker SIGKILLed once it had read records as many as a third of ``spec``'s ``events`` (on any
    topic: with a policy that forwards task events, ranking-feed's count too) and committed a checkpoint, while
    the replay (at ``rate`` events/s) still sends; a second one then runs until what it published settled at
    ``clean``'s end. What it published, and the workers' log."""
    log = tmp_path / "worker.log"
    first_port, second_port = kafka_local.free_ports(2)
    with fresh_broker(tmp_path / "broker") as bootstrap:
        first = start_worker(bootstrap, tmp_path, log, *DIRECT, "--metrics-port", str(first_port))
        sender = subprocess.Popen([*LAGGARD, "replay", "--trace", spec, "--bootstrap", bootstrap, "--max-rate",
                                   str(rate)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            offsets = CommittedOffsets(bootstrap)
            wait_for(lambda: (counted(first_port, "laggard_events_in_total"), offsets.now()),
                     lambda read: read[0] >= events / 3 and bool(read[1]), wait_s,
                     "a third of the trace read and a commit (after a checkpoint)", log)
            offsets.close()
            first.send_signal(signal.SIGKILL)
            first.wait()
            assert sender.poll() is None, "the worker was killed while the replay was still sending"
            with running_worker(bootstrap, tmp_path, log, *DIRECT, "--metrics-port", str(second_port)):
                assert sender.wait(300) == 0
                published = wait_until_settled(bootstrap, second_port, clean, log, wait_s)
        finally:
            for process in (first, sender):
                if process.poll() is None:
                    process.kill()
                    process.wait()
    return published, log.read_text(errors="replace")
