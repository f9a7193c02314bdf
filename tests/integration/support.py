"""Real brokers and real workers for the integration tier, started the way an operator would start them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from laggard import kafka_local
from streams.kafka_clients import partition_counts, read_to_end
from streams.serde import codec
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS
from streams.settings import Settings

T = TypeVar("T")
LAGGARD = [sys.executable, "-m", "laggard"]


@contextmanager
def fresh_broker(data_dir: Path) -> Iterator[str]:
    """A broker of its own on free ports (topics are shared per broker, so scenarios that replay whole
    traces get one each); stopped with SIGTERM afterwards whatever happened."""
    port, controller = kafka_local.free_ports(2)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=data_dir)
    kafka_local.start(broker)
    try:
        yield broker.bootstrap
    finally:
        kafka_local.stop(broker)


@contextmanager
def running_worker(bootstrap: str, workdir: Path, log: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`laggard worker` as a subprocess; stopped with SIGTERM on exit (unless the test killed it)."""
    process = start_worker(bootstrap, workdir, log, *extra)
    try:
        yield process
    finally:
        stop_worker(process)


def start_worker(bootstrap: str, workdir: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LAGGARD_DATA_DIR=str(workdir / "faust"), LAGGARD_BOOTSTRAP_SERVERS=bootstrap)
    with open(log, "ab") as out:
        return subprocess.Popen([*LAGGARD, "worker", "--web-port", "0", *extra], stdout=out,
                                stderr=subprocess.STDOUT, env=env)


def stop_worker(process: subprocess.Popen[bytes], timeout_s: float = 60) -> int | None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError("the worker did not stop within a minute of SIGTERM") from None
    return process.returncode


def wait_for_worker_topics(bootstrap: str, log: Path) -> None:
    """Until a starting worker has created its input topics. A producer that writes first auto-creates
    task-events with the broker's default of 1 partition, and the worker then runs on 1 partition."""
    settings = Settings(bootstrap_servers=bootstrap)
    wait_for(lambda: partition_counts(settings, [TASK_EVENTS.name, JOB_EVENTS.name]), lambda found: len(found) == 2,
             60, "the worker's topics", log)


def replay(bootstrap: str, spec: str, *extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*LAGGARD, "replay", "--trace", spec, "--bootstrap", bootstrap, "--json", *extra],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


def decoded(bootstrap: str, topic: str) -> list[Any]:
    """Every record on ``topic``, decoded with the project's codec."""
    return [codec.decode(record.value) for record in read_to_end(Settings(bootstrap_servers=bootstrap), topic)]


def wait_for(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float, what: str,
             log: Path | None = None) -> T:
    """Poll ``probe`` until ``done`` holds; fail with the worker's log tail when it never does."""
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not done(value):
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}; last: {value!r}\n{tail}")
        time.sleep(1.0)
        value = probe()
    return value
