"""A new user's first run: `laggard worker` started in an empty directory with default settings, fed a CSV trace
(no job events at all, so no job ends), finds exactly the injected slow nodes (issue 18).

Default settings wait for job events (a partition's job stream is declared idle after 60 s of wall time) and
finalise a job only after an hour of silence, the whole window: the z-values that get these nodes listed are the
provisional ones of jobs still running.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.csv_cluster import cluster_rows
from tests.integration.support import LAGGARD, decoded, fresh_broker, replay, stop_worker, wait_for

SLOW = ("n05", "n22")


def test_a_worker_in_an_empty_directory_lists_the_slow_nodes_of_a_csv_trace_without_job_ends(tmp_path: Path) -> None:
    trace = tmp_path / "tasks.csv"
    trace.write_text("\n".join(cluster_rows(SLOW, jobs=300, seed=11)) + "\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGGARD_") or k == "LAGGARD_TRACES_DIR"}
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        with open(log, "ab") as out:
            worker = subprocess.Popen([*LAGGARD, "worker", "--bootstrap", bootstrap, "--web-port", "0"], cwd=empty,
                                      env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            replay(bootstrap, f"csv:{trace}")
            deltas = wait_for(lambda: decoded(bootstrap, "blacklist-deltas"),
                              lambda ds: {e.node_id for d in ds for e in d.added} >= set(SLOW), 300,
                              "deltas listing the slow nodes", log)
        finally:
            stop_worker(worker)
    added = {entry.node_id for delta in deltas for entry in delta.added}
    assert added == set(SLOW), f"exactly the injected slow nodes: {sorted(added)}"
    assert (empty / ".laggard" / "worker").is_dir(), "the worker made its data directory where it started"
    assert "Traceback" not in log.read_text(errors="replace")
