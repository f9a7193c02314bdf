"""Two workers and two rebalances in the middle of a replay: a second worker joins and takes some partitions, then
the one holding the ranking leaves (SIGTERM) and the other takes everything over, the ranking's state with it.
The deltas, the final snapshot and every node's statistics in every window are the clean run's. (Before
streams.agents.commit sought partitions with nothing committed back to their first record, two runs in four went
wrong here: the worker that kept the ranking through the join had read its feed without committing, forgot the
state at the revocation and went on from where it had fetched, so three nodes were listed at once.)

Each step is seen on the workers' /metrics (the consumer lag they report, one series per partition they hold),
never assumed from a sleep, and each is checked to happen while the replay is still sending.

The workers run as deployed, under their supervisor (``--restart-on-stall``): Faust's changelog recovery after a
rebalance sometimes waits for events that never come ("No event received for active tp ... since recovery
start"; CI saw it once in three runs, session 20 twice in four under load), the worker's liveness check ends it
after ``LAGGARD_STALL_TIMEOUT_S`` (30 s here) with exit 75, and the supervisor starts it again from its
checkpoints. Without the supervisor that worker was simply gone and the test timed out."""

from __future__ import annotations

from pathlib import Path

import pytest

from laggard import kafka_local
from tests.integration.operations.support import (
    PARTITIONS,
    assert_same_end,
    clean_run,
    counted,
    lags,
    own_broker,
    start,
    start_worker,
    stop,
    wait_until,
    wait_until_settled,
)

SPEC = "synthetic:nodes=40,slow=3,jobs=300,seed=3"  # 24,742 events
RATE = 400  # events per second: the replay lasts about a minute, long enough for both rebalances
NO_PREDICTION = {"LAGGARD_PREDICTION_METHOD": "off"}  # its state reaches neither the snapshot nor the scores
AS_DEPLOYED = {**NO_PREDICTION, "LAGGARD_STALL_TIMEOUT_S": "30"}  # with --restart-on-stall (the module's text)
RANKING = ("ranking-feed", 0)
SOURCES = frozenset({RANKING} | {(topic, p) for topic in ("task-events", "job-events") for p in range(PARTITIONS)})


def _split(first: int, second: int) -> tuple[frozenset[tuple[str, int]], frozenset[tuple[str, int]]] | None:
    """The partitions each worker holds once they share every source partition between them, each some."""
    a, b = frozenset(lags(first)), frozenset(lags(second))
    return (a, b) if a and b and not a & b and a | b == SOURCES else None


@pytest.mark.timeout(420)  # a stalled recovery's restart included
def test_a_worker_joining_and_one_leaving_mid_replay_end_as_the_clean_run(tmp_path: Path) -> None:
    clean = clean_run(SPEC)
    first_log, second_log, replay_log = tmp_path / "first.log", tmp_path / "second.log", tmp_path / "replay.log"
    first_port, second_port = kafka_local.free_ports(2)
    with own_broker(tmp_path / "broker") as broker:
        bootstrap = broker.bootstrap
        first = start_worker(bootstrap, first_port, tmp_path / "first", first_log, supervised=True, **AS_DEPLOYED)
        second = replay = None
        try:
            wait_until(lambda: frozenset(lags(first_port)) == SOURCES, 120, "the first worker to hold everything",
                       first_log)
            replay = start(["replay", "--trace", SPEC, "--bootstrap", bootstrap, "--max-rate", str(RATE)],
                           replay_log)
            wait_until(lambda: counted(first_port, "laggard_events_in_total") > 0, 60,
                       "the first worker to read the replay", first_log)

            second = start_worker(bootstrap, second_port, tmp_path / "second", second_log, supervised=True,
                                  **AS_DEPLOYED)
            joined = wait_until(lambda: _split(first_port, second_port), 120, "the partitions to be shared",
                                second_log)
            assert replay.poll() is None, "the second worker joined while the replay was still sending"
            read_before = counted(second_port, "laggard_events_in_total")
            wait_until(lambda: counted(second_port, "laggard_events_in_total") > read_before, 60,
                       "the second worker to read on its partitions", second_log)

            leaving = first if RANKING in joined[0] else second
            staying_port, staying_log = ((second_port, second_log) if leaving is first else (first_port, first_log))
            stop(leaving)
            assert leaving.returncode == 0, "the leaving worker stopped cleanly"
            wait_until(lambda: frozenset(lags(staying_port)) == SOURCES, 120,
                       "the remaining worker to hold everything", staying_log)
            assert replay.poll() is None, "the first worker left while the replay was still sending"

            assert replay.wait(180) == 0, replay_log.read_text(errors="replace")[-2000:]
            published = wait_until_settled(bootstrap, staying_port, clean, staying_log, 180)
        finally:
            for process in (replay, second, first):
                if process is not None:
                    stop(process)

    moved = "the ranking" if RANKING in joined[0] else "task and job partitions"
    print(f"shared: first {sorted(joined[0])}, second {sorted(joined[1])}; the leaver held {moved}")
    assert_same_end(published, clean)
