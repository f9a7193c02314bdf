"""The YARN adapter against a real ResourceManager (Hadoop 3.5.0 from Maven Central, started by this module).

The ranking's own deltas for a fault that comes and goes (two nodes 2x slow from hour 1 to hour 3) go onto
`blacklist-deltas` on a broker of this module's; `laggard adapter yarn` reads them, writes the RM's exclude file
through a host map (trace node ids are not host names) and runs the real `rmadmin -refreshNodes`. The RM, asked
over its REST API, reports the listed hosts DECOMMISSIONED and the others RUNNING, and all RUNNING again once the
release delta is applied. A bad setup (no Java, no jars, no RM) is one error line from the adapter, no traceback.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from producers.registry import open_trace
from streams import kafka_clients
from streams.core.events import BlacklistDelta
from streams.local import LocalPipeline
from streams.serde import codec
from streams.serde.topics import BLACKLIST_DELTAS, BLACKLIST_SNAPSHOT
from streams.settings import Settings
from tests.integration.operations.support import (
    PARTITIONS,
    RM_ADMIN_CLI,
    Yarn,
    own_broker,
    own_yarn,
    wait_until,
)
from tests.integration.support import LAGGARD

SCENARIO = "scenario:cpu-2x,seed=1,nodes=20,hours=4"
CLUSTER = "yarn-rm"
# One NodeManager per loopback address: YARN excludes a host (name or IP), never a port.
HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def scenario() -> tuple[list[BlacklistDelta], list[str]]:
    """The deltas the ranking publishes for the scenario, and the nodes that really were slow."""
    trace = open_trace(SCENARIO)
    pipeline = LocalPipeline(Settings(cluster_id=CLUSTER), partitions=PARTITIONS)
    deltas = list(pipeline.run(trace, finish=True))
    return deltas, sorted(trace.ground_truth["slow_nodes"])  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with own_broker(tmp_path_factory.mktemp("broker")) as broker:
        topics = (BLACKLIST_DELTAS, BLACKLIST_SNAPSHOT)
        kafka_clients.create_topics(Settings(bootstrap_servers=broker.bootstrap), topics)
        yield broker.bootstrap


@pytest.fixture(scope="module")
def yarn(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("yarn")
    began = time.monotonic()
    with own_yarn(home, HOSTS, home / "yarn.exclude") as rm:
        print(f"ResourceManager and {len(HOSTS)} NodeManagers up in {time.monotonic() - began:.1f} s")
        yield rm


def publish(bootstrap: str, records: list[BlacklistDelta]) -> None:
    producer = kafka_clients.producer(Settings(bootstrap_servers=bootstrap))
    try:
        for record in records:
            producer.send(BLACKLIST_DELTAS.name, key=codec.encode_key(record.cluster_id), value=codec.encode(record))
        producer.flush()
    finally:
        producer.close()


def run_adapter(bootstrap: str, workdir: Path, refresh: str, exclude: Path, hosts: Path) -> tuple[int, Any, str]:
    """`laggard adapter yarn --once --json` as an operator runs it; (exit status, outcome, stderr)."""
    done = subprocess.run(
        [*LAGGARD, "adapter", "yarn", "--bootstrap", bootstrap, "--cluster-id", CLUSTER, "--once", "--json",
         "--retry-wait", "0.2", "--exclude-file", str(exclude), "--host-map", str(hosts), "--refresh-command",
         refresh, "--state-file", str(workdir / "adapter.json")],
        capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, orjson.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def rm_reports(yarn: Yarn, expected: dict[str, str], timeout_s: float = 90) -> float:
    """Wait until the RM reports every host in ``expected`` in its state; seconds it took."""
    began = time.monotonic()
    wait_until(lambda: yarn.states() == expected, timeout_s, f"the RM to report {expected} (it reports "
               f"{yarn.states()})", yarn.log, every_s=0.5)
    return time.monotonic() - began


def test_listed_hosts_are_decommissioned_by_the_real_rm_and_come_back_when_released(
        scenario: tuple[list[BlacklistDelta], list[str]], kafka: str, yarn: Yarn, tmp_path: Path) -> None:
    deltas, slow = scenario
    listing = [d for d in deltas if d.added]
    release = [d for d in deltas if d.removed]
    assert {e.node_id for d in listing for e in d.added} == set(slow) and len(slow) == 2, deltas
    # each node is released when it has recovered, in a delta of its own or with the other
    assert {r.node_id for d in release for r in d.removed} == set(slow), "the ranking never released them"
    healthy = next(f"node-{i:02d}" for i in range(20) if f"node-{i:02d}" not in slow)
    hosts = tmp_path / "hosts.map"
    hosts.write_text(f"{slow[0]} {HOSTS[0]}\n{slow[1]} {HOSTS[1]}\n{healthy} {HOSTS[2]}\n")
    exclude = yarn.exclude
    assert yarn.states() == dict.fromkeys(HOSTS, "RUNNING")

    publish(kafka, listing)
    status, outcome, log = run_adapter(kafka, tmp_path, yarn.refresh_command(), exclude, hosts)
    assert status == 0 and outcome["version"] == listing[-1].version and outcome["applied"] == len(listing), log
    assert exclude.read_text().split() == [HOSTS[0], HOSTS[1]]
    took = rm_reports(yarn, {HOSTS[0]: "DECOMMISSIONED", HOSTS[1]: "DECOMMISSIONED", HOSTS[2]: "RUNNING"})
    print(f"decommissioned {took:.1f} s after the adapter returned")
    # The launcher starts a stopped NodeManager again after 1 s, as a supervisor would: the RM turns it away.
    wait_until(lambda: re.search(rf"Disallowed NodeManager from\s+{re.escape(HOSTS[0])}\b", yarn.log.read_text()),
               30, "the RM to turn a restarted NodeManager away", yarn.log)
    assert yarn.states()[HOSTS[0]] == "DECOMMISSIONED"

    publish(kafka, release)
    status, outcome, log = run_adapter(kafka, tmp_path, yarn.refresh_command(), exclude, hosts)
    assert status == 0 and outcome["version"] == release[-1].version and outcome["blacklist"] == [], log
    assert exclude.read_text() == ""
    took = rm_reports(yarn, dict.fromkeys(HOSTS, "RUNNING"))
    print(f"all RUNNING again {took:.1f} s after the release was applied")


def _dead_rm_conf(yarn: Yarn, home: Path) -> Path:
    """A client configuration naming an RM admin port nothing listens on, with short client retries."""
    from laggard import kafka_local

    conf = home / "dead-rm-conf"
    conf.mkdir()
    shutil.copy(yarn.conf / "log4j.properties", conf)
    settings = {"yarn.resourcemanager.admin.address": f"127.0.0.1:{kafka_local.free_ports(1)[0]}",
                "yarn.resourcemanager.connect.max-wait.ms": "2000",
                "yarn.resourcemanager.connect.retry-interval.ms": "500", "ipc.client.connect.max.retries": "0"}
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>\n" for k, v in settings.items())
    (conf / "yarn-site.xml").write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')
    return conf


@pytest.mark.parametrize(("setup", "says"), [
    ("no-java", "could not run: [Errno 2] No such file or directory"),
    ("no-jars", f"Could not find or load main class {RM_ADMIN_CLI}"),
    ("rm-unreachable", "refreshNodes: Call From"),
])
def test_a_bad_refresh_setup_is_one_error_line_and_the_version_is_kept(
        scenario: tuple[list[BlacklistDelta], list[str]], kafka: str, yarn: Yarn, tmp_path: Path, setup: str,
        says: str) -> None:
    deltas, slow = scenario
    publish(kafka, [d for d in deltas if d.added][:1])  # a first delta is there for a fresh adapter to apply
    hosts = tmp_path / "hosts.map"
    hosts.write_text(f"{slow[0]} {HOSTS[0]}\n")
    (tmp_path / "empty-lib").mkdir()
    refresh = {"no-java": yarn.refresh_command(java=str(tmp_path / "no-java" / "java")),
               "no-jars": yarn.refresh_command(lib=tmp_path / "empty-lib"),
               "rm-unreachable": yarn.refresh_command(conf=_dead_rm_conf(yarn, tmp_path))}[setup]
    status, outcome, log = run_adapter(kafka, tmp_path, refresh, tmp_path / "yarn.exclude", hosts)
    assert status == 3 and outcome["version"] is None, log
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "change not applied" in errors[0] and says in errors[0], log
    assert "Traceback" not in log and "\tat " not in log
    if setup == "rm-unreachable":
        assert "Connection refused" in errors[0]
