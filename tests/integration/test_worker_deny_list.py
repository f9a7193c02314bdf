"""An operator's deny-list reaches `blacklist-deltas` before any task has finished.

The ranking's first boundary is dated by the data, and under the default policy the first datum is a finished
task's z-value; the deny-list needs none. Here a worker with default settings and one deny-listed node is fed a CSV
trace of tasks that are all still running (a source that never reports completions): the node is listed, with the
deny-list as its reason, and nothing else.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.csv_cluster import HEADER
from tests.integration.support import LAGGARD, decoded, fresh_broker, replay, stop_worker, wait_for

DENIED = "n13"


def test_a_worker_publishes_its_deny_list_from_a_stream_where_no_task_finishes(tmp_path: Path) -> None:
    trace = tmp_path / "running.csv"
    rows = [f"j{i // 20},t{i % 20},n{i % 40:02d},{1 + i * 15_000_000},,RUNNING" for i in range(400)]
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGGARD_") or k == "LAGGARD_TRACES_DIR"}
    env["LAGGARD_DENY_LIST"] = DENIED
    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap:
        with open(log, "ab") as out:
            worker = subprocess.Popen([*LAGGARD, "worker", "--bootstrap", bootstrap, "--web-port", "0"],
                                      cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            replay(bootstrap, f"csv:{trace}")
            deltas = wait_for(lambda: decoded(bootstrap, "blacklist-deltas"), lambda ds: len(ds) > 0, 300,
                              "a delta listing the deny-listed node", log)
        finally:
            stop_worker(worker)
    assert [(e.node_id, e.reason) for d in deltas for e in d.added] == [(DENIED, "on the deny-list")]
    assert [d.version for d in deltas] == [1] and all(not d.removed for d in deltas)
    assert "Traceback" not in log.read_text(errors="replace")
