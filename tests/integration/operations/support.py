"""What the operational tier shares: a broker that can be restarted in place, processes with metrics ports, scrapes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from laggard import kafka_local
from producers.registry import open_trace
from streams.core.events import BlacklistSnapshot
from streams.local import LocalPipeline
from streams.settings import Settings
from tests.integration.support import LAGGARD

PARTITIONS = 4


@contextmanager
def own_broker(data_dir: Path) -> Iterator[kafka_local.Broker]:
    port, controller = kafka_local.free_ports(2)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=data_dir)
    kafka_local.start(broker)
    try:
        yield broker
    finally:
        kafka_local.stop(broker)


def final_snapshot(spec: str) -> BlacklistSnapshot:
    """The snapshot an uninterrupted run ends with (the in-process runner publishes what a live worker does)."""
    pipeline = LocalPipeline(Settings(), partitions=PARTITIONS)
    list(pipeline.run(open_trace(spec), finish=False))
    return pipeline.blacklist


def start(args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([*LAGGARD, *args], stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, **env))


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample on /metrics: (name, sorted labels) -> value."""
    status, text = get(port, "/metrics")
    assert status == 200, text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def wait_until(condition, timeout_s: float, what: str, log: Path | None = None, every_s: float = 1.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{tail}")
        time.sleep(every_s)
