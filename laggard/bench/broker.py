"""The bench's own Kafka broker and workers: started on free ports under a temporary directory, always stopped.

Every process started here writes its pid under the bench's directory (``pids/``), so the parent process can
stop whatever a crashed stage left behind (:func:`stop_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import TopicPartition

from laggard import kafka_local
from laggard.bench.common import cpu_seconds, say, vm_hwm_mb
from streams import kafka_clients
from streams.agents.offsets import STALLED_EXIT
from streams.serde import topics as registry
from streams.settings import Settings

# Broker-side timestamps: every record carries the time the broker appended it, whoever produced it.
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
INPUT_TOPICS = (registry.TASK_EVENTS.name, registry.JOB_EVENTS.name)
LAGGARD = [sys.executable, "-m", "laggard"]  # how workers are started (an experiment may wrap it)
MAX_RESTARTS = 3  # stall exits a scenario's workers may take in all before the scenario fails


@contextlib.contextmanager
def own_broker(workdir: Path) -> Iterator[kafka_local.Broker]:
    """A broker of the bench's own on free ports; stopped (SIGTERM, then SIGKILL) whatever happens."""
    port, controller = kafka_local.free_ports(2)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=workdir / "broker")
    say(f"starting a Kafka broker at {broker.bootstrap} (data in {broker.home})")
    try:
        kafka_local.start(broker)
        yield broker
    finally:
        kafka_local.stop(broker)


def broker_peak_mb(broker: kafka_local.Broker) -> float | None:
    pid = kafka_local.status(broker)
    return None if pid is None else vm_hwm_mb(pid)


def fresh_topics(settings: Settings, partitions: int, attempts: int = 5, keep: frozenset[str] = frozenset()) -> None:
    """Delete every topic but Kafka's own (and ``keep``), then create laggard's (but ``keep``) with broker
    timestamps.

    A client of the scenario before (a worker or replayer still closing) can ask for a topic's metadata between
    the delete and the create, and the broker then creates it with its defaults (CI saw 'task-events' already
    exist): the whole round is tried again, a few times."""
    for attempt in range(attempts):
        client = kafka_clients.admin(settings)
        try:
            doomed = [name for name in client.list_topics() if not name.startswith("__") and name not in keep]
            if doomed:
                client.delete_topics(doomed)
                deadline = time.monotonic() + 60
                while set(doomed) & set(client.list_topics()):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"topics {doomed} were not deleted within a minute")
                    time.sleep(0.5)
            client.create_topics([
                NewTopic(name=topic.name, num_partitions=topic.partitions or partitions, replication_factor=1,
                         topic_configs={**topic.config(), **LOG_APPEND_TIME})
                for topic in registry.TOPICS if topic.name not in keep
            ])  # fmt: skip
            return
        except TopicAlreadyExistsError:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)
        finally:
            client.close()


def input_partitions(settings: Settings) -> list[TopicPartition]:
    client = kafka_clients.consumer(settings)
    try:
        return [TopicPartition(topic, p) for topic in INPUT_TOPICS for p in sorted(client.partitions_for_topic(topic))]
    finally:
        client.close()


@contextlib.contextmanager
def inputs_from_start(settings: Settings) -> Iterator[Any]:
    """A kafka-python consumer assigned every task-events and job-events partition, at its start; closed after."""
    client = kafka_clients.consumer(settings)
    try:
        partitions = input_partitions(settings)
        client.assign(partitions)
        client.seek_to_beginning(*partitions)
        yield client
    finally:
        client.close()


class Workers:
    """``laggard worker`` subprocesses of one app id and engine (faust or direct); their peak memory and CPU are
    read before they stop."""

    def __init__(self, workdir: Path, settings: Settings, app_id: str, count: int, engine: str = "faust",
                 role: str = "all", restart_stalled: bool = False) -> None:
        self.workdir = workdir
        self.engine = engine
        self.role = role  # LAGGARD_WORKER_ROLE (direct engine)
        self.settings = settings
        self.app_id = app_id
        self.count = count
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self._log_from: list[int] = []  # where each process's own part of its (appended) log begins
        self.started_wall = 0.0
        # Stall exits restarted, as a supervisor would (``check_alive``), only where asked: a throughput scenario
        # reports them; a latency or equality measurement must not absorb a restart's gap.
        self.restart_stalled = restart_stalled
        self.restarts = 0

    def start(self) -> None:
        (self.workdir / "pids").mkdir(parents=True, exist_ok=True)
        for index in range(self.count):
            self._log_from.append(_size(self._log(index)))
            self.processes.append(self._spawn(index))
            self.logs.append(self._log(index))
        self.started_wall = time.time()

    def _log(self, index: int) -> Path:
        return self.workdir / f"{self.app_id}-{index}.log"

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        env = dict(os.environ, LAGGARD_BOOTSTRAP_SERVERS=self.settings.bootstrap_servers,
                   LAGGARD_APP_ID=self.app_id, LAGGARD_DATA_DIR=str(self.workdir / f"{self.app_id}-{index}"),
                   LAGGARD_TOPIC_PARTITIONS=str(self.settings.topic_partitions),
                   LAGGARD_ENGINE=self.engine, LAGGARD_WORKER_ROLE=self.role)  # fmt: skip
        with open(self._log(index), "ab") as out:
            process = subprocess.Popen([*LAGGARD, "worker", "--web-port", "0"],
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        (self.workdir / "pids" / f"worker-{process.pid}").write_text(str(process.pid))
        return process

    def check_alive(self) -> None:
        """With ``restart_stalled``, a worker that ended itself with the stall exit (a wedged client; its checkpoints
        are in Kafka) is started again, as the deployment's supervisor does (``restartPolicy``, docker-compose
        ``restart``), up to ``MAX_RESTARTS`` times in all; any other exit ends the scenario with the worker's log
        tail. A restarted worker's CPU and peak memory (``usage``) are those of its second life only."""
        for index, (process, log) in enumerate(zip(self.processes, self.logs, strict=True)):
            if process.poll() is None:
                continue
            (self.workdir / "pids" / f"worker-{process.pid}").unlink(missing_ok=True)
            if self.restart_stalled and process.returncode == STALLED_EXIT and self.restarts < MAX_RESTARTS:
                self.restarts += 1
                say(f"worker {process.pid} stalled (exit {STALLED_EXIT}); starting it again, as a supervisor would")
                self._log_from[index] = _size(log)
                self.processes[index] = self._spawn(index)
                continue
            tail = log.read_text(errors="replace")[-1500:]
            raise RuntimeError(f"worker {process.pid} exited with {process.returncode}; log tail:\n{tail}")

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not all("Worker ready" in _read_from(log, at) for log, at in zip(self.logs, self._log_from, strict=True)):
            self.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers of {self.app_id} not ready within {timeout_s:.0f} s; see {self.logs}")
            time.sleep(0.5)

    def usage(self) -> dict[str, Any]:
        """Peak resident memory (MB) and CPU seconds of each running worker."""
        return {"peak_mb": [vm_hwm_mb(p.pid) for p in self.processes],
                "cpu_seconds": [cpu_seconds(p.pid) for p in self.processes]}  # fmt: skip

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            (self.workdir / "pids" / f"worker-{process.pid}").unlink(missing_ok=True)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _read_from(path: Path, offset: int) -> str:
    """The log from ``offset`` on: a restarted worker's own lines, not its predecessor's "Worker ready"."""
    with open(path, "rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


def stop_leftovers(workdir: Path) -> list[str]:
    """Stop brokers and workers a stage left running under ``workdir`` (it crashed); say what was stopped."""
    stopped = []
    for pid_file in sorted((workdir / "pids").glob("worker-*")) if (workdir / "pids").is_dir() else []:
        pid = int(pid_file.read_text())
        with contextlib.suppress(OSError):
            if b"laggard" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                stopped.append(f"worker {pid}")
        pid_file.unlink(missing_ok=True)
    for pid_file in workdir.glob("**/broker.pid"):
        pid = kafka_local.stop(kafka_local.Broker(data_dir=pid_file.parent))
        if pid is not None:
            stopped.append(f"broker {pid}")
    return stopped
