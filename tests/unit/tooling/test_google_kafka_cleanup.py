"""The Google bench leaves no process behind when it fails: the workers are stopped if the snapshot watch
cannot be made, and the replay child is ended if anything fails while it runs (no broker: its pieces are fakes)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from laggard.bench import google_kafka
from streams.settings import Settings


class RecordingWorkers:
    """``Workers`` that start nothing and remember whether they were stopped."""

    made: ClassVar[list[RecordingWorkers]] = []

    def __init__(self, *args: Any) -> None:
        self.stopped = False
        RecordingWorkers.made.append(self)

    def start(self) -> None:
        pass

    def wait_ready(self) -> None:
        pass

    def check_alive(self) -> None:
        pass

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextlib.contextmanager
    def own_broker(workdir: Path) -> Iterator[Any]:
        yield SimpleNamespace(bootstrap="127.0.0.1:9")

    monkeypatch.setattr(google_kafka, "own_broker", own_broker)
    monkeypatch.setattr(google_kafka, "fresh_topics", lambda settings, partitions: None)
    monkeypatch.setattr(google_kafka, "Workers", RecordingWorkers)
    monkeypatch.setattr(google_kafka.kafka_local, "status", lambda broker: None)
    monkeypatch.setattr(google_kafka, "cpu_seconds", lambda pid: 0.0)
    RecordingWorkers.made.clear()


def _run(workdir: Path) -> None:
    expected: Any = SimpleNamespace(version=1)  # the snapshot to wait for: only its version is read before
    google_kafka.through_kafka(workdir, Settings(), "synthetic:nodes=4", "direct", expected)


@pytest.mark.usefixtures("no_broker")
def test_workers_are_stopped_when_the_snapshot_watch_cannot_be_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(settings: Settings) -> None:
        raise RuntimeError("no consumer")

    monkeypatch.setattr(google_kafka, "SnapshotWatch", refuse)
    with pytest.raises(RuntimeError, match="no consumer"):
        _run(tmp_path)
    assert RecordingWorkers.made[-1].stopped


@pytest.mark.usefixtures("no_broker")
def test_the_replay_child_is_ended_when_the_bench_fails_while_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replays: list[google_kafka._Replay] = []
    made = google_kafka._Replay.__init__

    def init(self: google_kafka._Replay, *args: Any) -> None:
        made(self, *args)
        replays.append(self)

    class FailingWatch:
        def __init__(self, settings: Settings) -> None:
            pass

        def new(self, wait_s: float) -> list[Any]:
            raise RuntimeError("the snapshot topic went away")

        def close(self) -> None:
            pass

    monkeypatch.setattr(google_kafka, "LAGGARD", [sys.executable, "-c", "import time; time.sleep(120)"])
    monkeypatch.setattr(google_kafka._Replay, "__init__", init)
    monkeypatch.setattr(google_kafka, "SnapshotWatch", FailingWatch)
    with pytest.raises(RuntimeError, match="went away"):
        _run(tmp_path)
    assert RecordingWorkers.made[-1].stopped
    process = replays[-1]._process
    try:
        assert process.poll() is not None  # ended, not left sleeping
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
