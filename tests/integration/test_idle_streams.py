"""On a real broker: silent streams do not stall the ranking forever.

The trace is a CSV task table (no job events at all) whose jobs all hash to partitions 0 and 1 of four:
partitions 0 and 1 wait for a job stream that never speaks, and the ranking waits for partitions 2 and 3,
which receive nothing. Strict waiting would publish no delta ever; with the idle timeout the worker declares
those streams idle and blacklists the slow nodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.config import partition_for
from streams.core.events import BlacklistDelta
from tests.csv_cluster import cluster_rows
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for

PARTITIONS = 4
SLOW = ("n03", "n17", "n29")


def write_trace(path: Path, jobs: int = 300, seed: int = 4) -> Path:
    """40 nodes, tasks on SLOW take 1.8x; one job a minute; job ids chosen to land on partitions 0 and 1."""
    ids = (f"job{i}" for i in range(100_000) if partition_for(f"job{i}", PARTITIONS) in (0, 1))
    path.write_text("\n".join(cluster_rows(SLOW, jobs, seed, every_s=60, job_ids=ids)) + "\n")
    return path


def test_silent_partitions_and_job_streams_are_ranked_without_after_the_idle_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = write_trace(tmp_path / "tasks.csv")
    monkeypatch.setenv("LAGGARD_IDLE_STREAM_TIMEOUT_S", "3")
    monkeypatch.setenv("LAGGARD_JOB_IDLE_TIMEOUT_S", "600")  # a CSV has no job ends: jobs are final once idle
    log = tmp_path / "worker.log"
    with (fresh_broker(tmp_path / "broker") as bootstrap,
          running_worker(bootstrap, tmp_path, log, "--partitions", str(PARTITIONS))):
        replayed = replay(bootstrap, f"csv:{trace}")
        assert "csv traces carry no job ends: workers rank their jobs by provisional z-values" in replayed.stderr
        deltas: list[BlacklistDelta] = wait_for(
            lambda: decoded(bootstrap, "blacklist-deltas"),
            lambda ds: {e.node_id for d in ds for e in d.added} >= set(SLOW), 240, "the slow nodes", log)
    added = {entry.node_id for delta in deltas for entry in delta.added}
    assert added == set(SLOW), "the slow nodes and no other"
    text = log.read_text(errors="replace")
    for partition in (2, 3):
        assert f"normalising partition {partition} has not passed the latest ranking boundary" in text
    assert "they no longer wait for job-events" in text
