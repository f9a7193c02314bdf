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


def test_ctrl_c_while_the_broker_starts_leaves_nothing_running(tmp_path: Path) -> None:
    """A Ctrl-C a second into `kafka start` printed "Aborted!" and left the broker's JVM running in the background
    (it has a session of its own), where `kafka status` then found it."""
    import signal
    import time

    from laggard import kafka_local

    port, controller = kafka_local.free_ports(2)
    data = tmp_path / "interrupted"
    command = [sys.executable, "-m", "laggard", "kafka", "start", "--port", str(port), "--controller-port",
               str(controller), "--data-dir", str(data)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=data)
    deadline = time.monotonic() + 60
    while not broker.pid_file.exists():  # the JVM was launched; it answers seconds later
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    pid = int(broker.pid_file.read_text())
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=90)
    assert process.returncode == 130 and "Traceback" not in err and "Aborted!" not in err, err
    assert kafka_local.status(broker) is None and not kafka_local.port_open(port)
    try:  # a zombie (exited, its parent gone, and this machine's init reaps none) is not running
        alive = not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except FileNotFoundError:
        alive = False
    assert not alive, f"the broker's JVM {pid} is still running"

