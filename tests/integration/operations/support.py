"""What the operational tier shares: a broker that can be restarted in place, processes with metrics ports, scrapes,
and a real YARN ResourceManager with NodeManagers (yarn/YarnLocal.java, jars from `make yarn-jars`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from laggard import kafka_local
from producers.registry import open_trace
from streams.core.events import BlacklistSnapshot
from streams.local import LocalPipeline
from streams.settings import Settings
from tests.integration.support import LAGGARD

PARTITIONS = 4
ROOT = Path(__file__).resolve().parents[3]
YARN_LIB = ROOT / ".laggard" / "yarn-lib"
YARN_LAUNCHER = ROOT / "yarn" / "YarnLocal.java"
RM_ADMIN_CLI = "org.apache.hadoop.yarn.client.cli.RMAdminCLI"
NODE_STATES = "NEW,RUNNING,UNHEALTHY,DECOMMISSIONING,DECOMMISSIONED,LOST,REBOOTED,SHUTDOWN"


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


def yarn_jars() -> Path:
    """The jars `make yarn-jars` fetches (fetched here through the same target when a test runs without make)."""
    if not (YARN_LIB / ".fetched").exists():
        subprocess.run(["make", "--no-print-directory", "yarn-jars"], cwd=ROOT, check=True)
    return YARN_LIB


@dataclass(frozen=True)
class Yarn:
    """A running ResourceManager: its web address and the client configuration directory it wrote."""

    web: str
    conf: Path
    exclude: Path
    log: Path

    def refresh_command(self, java: str = "java", lib: Path = YARN_LIB, conf: Path | None = None) -> str:
        """`yarn rmadmin -refreshNodes` without Hadoop's scripts: the client class, the RM's jars and configuration."""
        return f"{java} -Xmx256m -cp {conf or self.conf}:{lib}/* {RM_ADMIN_CLI} -refreshNodes"

    def states(self) -> dict[str, str]:
        """Host -> state of every node the RM knows, as `/ws/v1/cluster/nodes` reports it."""
        with urllib.request.urlopen(f"{self.web}/ws/v1/cluster/nodes?states={NODE_STATES}", timeout=10) as answer:
            nodes = (json.load(answer).get("nodes") or {}).get("node") or []
        return {node["nodeHostName"]: node["state"] for node in nodes}


@contextmanager
def own_yarn(home: Path, hosts: Sequence[str], exclude: Path) -> Iterator[Yarn]:
    """A ResourceManager reading ``exclude`` and one NodeManager per host, stopped whatever happens."""
    lib = yarn_jars()
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    out = home / "launcher.out"
    command = ["java", "-Xmx768m", "-XX:TieredStopAtLevel=1", "-cp", f"{conf}:{lib}/*", str(YARN_LAUNCHER),
               "--dir", str(home), "--exclude-file", str(exclude), "--hosts", ",".join(hosts)]
    with open(out, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        def ready() -> str | None:
            if process.poll() is not None:
                raise AssertionError(f"the YARN launcher exited with {process.returncode}:\n"
                                     f"{out.read_text(errors='replace')[-3000:]}")
            return next((line for line in out.read_text(errors="replace").splitlines()
                         if line.startswith("ready ")), None)

        line = wait_until(ready, 240, "the ResourceManager and its NodeManagers", out, every_s=0.5)
        fields = dict(field.split("=", 1) for field in line.split()[1:])
        yield Yarn(fields["web"], Path(fields["conf"]), exclude, home / "yarn.log")
    finally:
        stop(process)
