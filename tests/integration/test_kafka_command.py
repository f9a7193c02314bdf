"""`laggard kafka start` and `stop` against the tier's real broker, from another data directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_stop_with_another_data_dir_says_the_broker_still_runs_and_fails(bootstrap: str, tmp_path: Path) -> None:
    """It printed "no Kafka broker of laggard runs with data dir ..." and exited 0 while the broker on that port
    went on serving: an operator read it as stopped. ``status`` already said "started with another --data-dir?"."""
    port = bootstrap.rpartition(":")[2]
    result = subprocess.run([sys.executable, "-m", "laggard", "kafka", "stop", "--port", port, "--data-dir",
                             str(tmp_path / "not-its-data")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"but a broker answers on 127.0.0.1:{port} and is still running" in result.stderr
    status = subprocess.run([sys.executable, "-m", "laggard", "topics", "list", "--bootstrap", bootstrap],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert status.returncode == 0, status.stderr  # nothing was stopped


def test_start_on_the_port_of_another_broker_names_it_and_starts_nothing(bootstrap: str, tmp_path: Path) -> None:
    """It waited 15 s (a grace for a broker of its own killed a moment ago) and then said only "port N is already in
    use by another process"; a broker that answers there is named at once, with how to use it."""
    port = bootstrap.rpartition(":")[2]
    data = tmp_path / "other-data"
    result = subprocess.run([sys.executable, "-m", "laggard", "kafka", "start", "--port", port, "--data-dir",
                             str(data)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"a Kafka broker already answers on 127.0.0.1:{port}" in result.stderr
    assert f"--bootstrap 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    assert not (data / "broker.pid").exists() and not list(data.rglob("server.properties"))

