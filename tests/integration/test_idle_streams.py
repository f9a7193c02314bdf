"""On a real broker: silent streams do not stall the ranking forever.

The trace is a CSV task table (no job events at all) whose jobs all hash to partitions 0 and 1 of four:
partitions 0 and 1 wait for a job stream that never speaks, and the ranking waits for partitions 2 and 3,
which receive nothing. Strict waiting would publish no delta ever; with the idle timeout the worker declares
those streams idle and blacklists the slow nodes.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from streams.core.events import BlacklistDelta
from streams.local import partition_for
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for

PARTITIONS = 4
SLOW = ("n03", "n17", "n29")


def write_trace(path: Path, jobs: int = 300, seed: int = 4) -> Path:
    """40 nodes, tasks on SLOW take 1.8x; one job a minute; job ids chosen to land on partitions 0 and 1."""
    rng = random.Random(seed)
    lines = ["job_id,task_id,node_id,start_us,end_us,status"]
    ids = (f"job{i}" for i in range(100_000))
    for job in range(jobs):
        job_id = next(j for j in ids if partition_for(j, PARTITIONS) in (0, 1))
        arrival = 1 + job * 60_000_000
        size = 60 * math.exp(rng.gauss(0, 0.5))
        for task in range(rng.randint(20, 50)):
            node = f"n{rng.randrange(40):02d}"
            duration = int(size * rng.paretovariate(3.0) * (1.8 if node in SLOW else 1.0) * 1e6)
            lines.append(f"{job_id},t{task},{node},{arrival},{arrival + duration},SUCCEEDED")
    path.write_text("\n".join(lines) + "\n")
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
        assert "csv traces carry no job ends; run the workers with LAGGARD_JOB_IDLE_TIMEOUT_S" in replayed.stderr
        deltas: list[BlacklistDelta] = wait_for(
            lambda: decoded(bootstrap, "blacklist-deltas"),
            lambda ds: {e.node_id for d in ds for e in d.added} >= set(SLOW), 240, "the slow nodes", log)
    added = {entry.node_id for delta in deltas for entry in delta.added}
    assert added == set(SLOW), "the slow nodes and no other"
    text = log.read_text(errors="replace")
    for partition in (2, 3):
        assert f"normalising partition {partition} has not passed the latest ranking boundary" in text
    assert "they no longer wait for job-events" in text
