"""A worker started after the whole trace is on the broker (a restart after downtime, a replay of history)
catches up with a short idle-stream timeout and still publishes exactly what the in-process runner does.

While catching up, a worker reads its partitions unevenly for longer than the timeout; a stream with records
on the broker it has not read yet is behind, not idle (streams.agents.idle_rules). Declaring it idle ranked
without it: on Google parts 0-9 the worker stopped at blacklist version 28 of 38.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.core.events import BlacklistDelta, BlacklistSnapshot
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for
from tests.integration.test_stream_pipeline import PARTITIONS, SPEC, in_process, summary


@pytest.fixture(scope="module")
def expected() -> tuple[list[BlacklistDelta], BlacklistSnapshot, dict]:
    return in_process(SPEC)


FAUST_GAP = ("at a 1 s timeout a loaded machine most likely holds a record between the Faust worker's agents "
             "(normaliser, ranking-feed, ranking) longer than the timeout after every input was read, and the "
             "ranking then ranks without that partition (seen once in CI, 1 of 4 runs); the direct engine runs "
             "both stages in one loop and has no such gap. The default timeout is 60 s")


@pytest.mark.parametrize("engine", [pytest.param("faust", marks=pytest.mark.xfail(strict=False, reason=FAUST_GAP)),
                                    "direct"])
def test_a_worker_catching_up_with_a_short_idle_timeout_publishes_the_in_process_result(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    expected: tuple[list[BlacklistDelta], BlacklistSnapshot, dict],
) -> None:
    local_deltas, local_final, _ = expected
    monkeypatch.setenv("LAGGARD_IDLE_STREAM_TIMEOUT_S", "1")  # far shorter than the catch-up takes
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        replay(bootstrap, SPEC)  # the whole trace first: the worker starts behind by all of it
        with running_worker(bootstrap, tmp_path, log, "--engine", engine, "--partitions", str(PARTITIONS)):
            snapshots = wait_for(lambda: decoded(bootstrap, "blacklist-snapshot"),
                                 lambda ss: bool(ss) and ss[-1].version >= local_final.version, 240,
                                 "the final snapshot", log)
        deltas = decoded(bootstrap, "blacklist-deltas")
    text = log.read_text(errors="replace")
    assert "ranking without it" not in text, "a partition still being read was declared idle"
    assert summary(deltas) == summary(local_deltas)
    final = snapshots[-1]
    assert (final.version, final.node_ids) == (local_final.version, local_final.node_ids)
    assert [(e.node_id, e.n, e.mean) for e in final.nodes] == [(e.node_id, e.n, e.mean) for e in local_final.nodes]
