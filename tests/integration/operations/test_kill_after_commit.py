"""A worker killed (SIGKILL) right after one of its offset commits, again and again, then one left to finish: the
final snapshot and every node's statistics in the last window are the clean run's. A commit that went ahead
while the checkpoint it relies on was still on its way (Faust's own flush before a commit gives up after 0.1 s;
streams.agents.commit waits for the broker's acknowledgement) would show here as events lost to the restarted
worker's state: the committed offset past what its rebuilt table covers."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

import pytest

from laggard import kafka_local
from tests.integration.operations.support import (
    CommittedOffsets,
    assert_same_end,
    clean_run,
    counted,
    own_broker,
    start_worker,
    stop,
    wait_until,
    wait_until_settled,
)
from tests.integration.support import replay

SPEC = "synthetic:nodes=40,slow=3,jobs=300,seed=3"
KILLS = 2
# The straggler predictor's state never reaches the snapshot or the scores: off, each life of the worker is shorter.
NO_PREDICTION = {"LAGGARD_PREDICTION_METHOD": "off"}


def _advanced(offsets: CommittedOffsets, before: dict[str, int]) -> dict[str, int] | None:
    """The committed offsets once any of them moved past ``before`` (a commit this worker made); else None."""
    now = offsets.now()
    return now if any(offset > before.get(tp, -1) for tp, offset in now.items()) else None


def _killed_right_after_a_commit(bootstrap: str, offsets: CommittedOffsets, data_dir: Path, log: Path
                                 ) -> tuple[dict[str, int], float]:
    """Start a worker and SIGKILL it as soon as the broker shows a commit of its own: the offsets it committed,
    and the seconds from the look that saw them to the kill."""
    before = offsets.now()
    (port,) = kafka_local.free_ports(1)
    worker = start_worker(bootstrap, port, data_dir, log, **NO_PREDICTION)
    try:
        # Ask the broker as fast as it answers (a few ms a call): the kill follows the commit at once.
        committed: dict[str, int] = wait_until(lambda: _advanced(offsets, before), 120,
                                               f"a commit by the worker of {data_dir.name}", log, every_s=0.005)
        seen = time.monotonic()
        worker.send_signal(signal.SIGKILL)
        killed_after_s = time.monotonic() - seen
        worker.wait(30)
    finally:
        stop(worker)
    return committed, killed_after_s


@pytest.mark.timeout(300)
def test_a_worker_killed_right_after_its_commits_ends_as_the_clean_run(tmp_path: Path) -> None:
    clean = clean_run(SPEC)
    log = tmp_path / "worker.log"
    with own_broker(tmp_path / "broker") as broker:
        bootstrap = broker.bootstrap
        replay(bootstrap, SPEC)  # the whole trace waits: every life of the worker is busy when it is killed
        offsets = CommittedOffsets(bootstrap)
        try:
            lives = [_killed_right_after_a_commit(bootstrap, offsets, tmp_path / f"faust-{life}", log)
                     for life in range(KILLS)]
            (port,) = kafka_local.free_ports(1)
            last = start_worker(bootstrap, port, tmp_path / "faust-last", log, **NO_PREDICTION)
            try:
                published = wait_until_settled(bootstrap, port, clean, log, 240)
                unconfirmed = counted(port, "laggard_commit_unconfirmed_sends_total")
            finally:
                stop(last)
            resumed = offsets.now()
        finally:
            offsets.close()

    commits = [committed for committed, _ in lives]
    print(f"killed {[f'{s * 1000:.1f} ms' for _, s in lives]} after seeing commits {commits}; the last worker's "
          f"commits waited for {unconfirmed:.0f} sends Faust's flush left unconfirmed")
    for earlier, later in itertools.pairwise([*commits, resumed]):
        assert all(later.get(tp, -1) >= offset for tp, offset in earlier.items()), "commits never went back"
    assert resumed != commits[-1], "the last worker went on past the last kill"
    assert_same_end(published, clean)
