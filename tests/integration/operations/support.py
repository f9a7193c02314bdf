"""What the operational tier shares: a broker that can be restarted in place, processes with metrics ports, scrapes,
a real YARN ResourceManager with NodeManagers (yarn/YarnLocal.java, jars from `make yarn-jars`), and a broker with TLS
and SASL/SCRAM listeners with the certificates it needs."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from laggard import kafka_local
from producers.registry import open_trace
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from streams.core.stages import RankResult
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


# --- TLS and SASL (test_security.py) ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Certificates:
    """Made by ``make_certificates``: a CA, the broker's keystore signed by it, and a CA that signed nothing here."""

    ca: Path
    keystore: Path
    keystore_password: str
    stranger_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _new_ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", "2", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


def make_certificates(directory: Path, password: str = "broker-keystore-pw") -> Certificates:
    """With openssl, as an operator would: a CA, a broker key and certificate for 127.0.0.1 signed by it, both in
    a PKCS12 keystore for the broker; and a second CA, trusted by nobody here."""
    directory.mkdir(parents=True, exist_ok=True)
    _new_ca(directory, "laggard-test-ca")
    _new_ca(directory, "stranger-ca")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
             "-subj", "/CN=localhost", cwd=directory)
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "laggard-test-ca.pem", "-CAkey", "laggard-test-ca.key",
             "-CAcreateserial", "-out", "broker.pem", "-days", "2", "-extfile", "san.ext", cwd=directory)
    _openssl("pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-certfile", "laggard-test-ca.pem",
             "-out", "broker.p12", "-passout", f"pass:{password}", cwd=directory)
    return Certificates(directory / "laggard-test-ca.pem", directory / "broker.p12", password,
                        directory / "stranger-ca.pem")


@contextmanager
def own_secure_broker(data_dir: Path, certificates: Certificates,
                      users: tuple[tuple[str, str], ...]) -> Iterator[kafka_local.Broker]:
    """A broker of its own with PLAINTEXT, SSL and SASL_SSL (SCRAM) listeners on free ports, started with
    `laggard kafka start` as README "Operating laggard" shows; stopped whatever happened."""
    port, controller, ssl_port, sasl_port = kafka_local.free_ports(4)
    security = kafka_local.Security(certificates.keystore, certificates.keystore_password, ssl_port, sasl_port, users)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=data_dir, security=security)
    command = [*LAGGARD, "kafka", "start", "--port", str(port), "--controller-port", str(controller), "--data-dir",
               str(data_dir), "--ssl-port", str(ssl_port), "--sasl-ssl-port", str(sasl_port), "--keystore",
               str(certificates.keystore), *(f"--scram-user={name}:{password}" for name, password in users)]
    started = subprocess.run(command, capture_output=True, text=True, timeout=180,
                             env=dict(os.environ, LAGGARD_KAFKA_KEYSTORE_PASSWORD=certificates.keystore_password))
    try:
        assert started.returncode == 0, started.stderr
        assert f"SASL_SSL at 127.0.0.1:{sasl_port}" in started.stdout, started.stdout
        yield broker
    finally:
        kafka_local.stop(broker)


class FakeKubernetesApi(http.server.BaseHTTPRequestHandler):
    """The three node calls of the Kubernetes API the k8s adapter makes (list, read, merge-patch), because no API
    server runs here; patches are applied to ``nodes``."""

    nodes: ClassVar[dict[str, dict[str, Any]]] = {}

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        name = self.path.split("?")[0].removeprefix("/api/v1/nodes").strip("/")
        if not name:
            self._send(200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                             "items": list(self.nodes.values())})
        elif name in self.nodes:
            self._send(200, self.nodes[name])
        else:
            self._send(404, {"kind": "Status", "code": 404})

    def do_PATCH(self) -> None:
        name = self.path.split("?")[0].removeprefix("/api/v1/nodes/")
        patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        node = self.nodes[name]
        node["metadata"].setdefault("annotations", {}).update(patch.get("metadata", {}).get("annotations", {}))
        node["spec"]["taints"] = patch.get("spec", {}).get("taints")
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        self._send(200, node)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def fake_kubernetes(directory: Path, node_names: list[str]) -> Iterator[Path]:
    """A FakeKubernetesApi with ``node_names`` on a free port; yields a kubeconfig that points at it."""
    FakeKubernetesApi.nodes = {name: {"apiVersion": "v1", "kind": "Node", "spec": {},
                                      "metadata": {"name": name, "resourceVersion": "1", "annotations": {}}}
                               for name in node_names}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeKubernetesApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "laggard", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "laggard"}}],
    }))
    try:
        yield kubeconfig
    finally:
        server.shutdown()
        server.server_close()


# Several workers, rebalances and kills (test_rebalance.py, test_kill_after_commit.py).

SOURCES = ("task-events", "job-events", "ranking-feed")


def start_worker(bootstrap: str, metrics_port: int, data_dir: Path, log: Path, supervised: bool = False, **env: str
                 ) -> subprocess.Popen[bytes]:
    """`laggard worker` with /metrics on ``metrics_port``; every worker of a test joins the same group.
    ``supervised``: under ``--restart-on-stall``, started again after a stall's exit 75, as deployed."""
    return start(["worker", "--bootstrap", bootstrap, "--partitions", str(PARTITIONS), "--web-port", "0",
                  "--metrics-port", str(metrics_port), *(["--restart-on-stall"] if supervised else [])], log,
                 LAGGARD_DATA_DIR=str(data_dir), **env)


def counted(port: int, name: str) -> float:
    """The sum of a counter's samples on a worker's /metrics (0 when it does not answer)."""
    try:
        return sum(v for (sample, _), v in scrape(port).items() if sample == name)
    except AssertionError:
        return 0.0


class CommittedOffsets:
    """The consumer group's committed offsets of the source topics, read from the broker."""

    def __init__(self, bootstrap: str, group: str = "laggard") -> None:
        from streams import kafka_clients

        self.group = group
        self._admin = kafka_clients.admin(Settings(bootstrap_servers=bootstrap))

    def now(self) -> dict[str, int]:
        from kafka.errors import KafkaError

        try:
            found = self._admin.list_group_offsets({self.group: None}).get(self.group, {})
        except KafkaError:  # no coordinator yet, a rebalance under way: nothing known this time
            return {}
        return {f"{tp.topic}:{tp.partition}": meta.offset for tp, meta in found.items()
                if tp.topic in SOURCES and meta.offset >= 0}

    def close(self) -> None:
        self._admin.close()


def assert_same_snapshot(final: BlacklistSnapshot, expected: BlacklistSnapshot) -> None:
    """The version, the nodes listed and each entry's statistics are the uninterrupted run's."""
    assert (final.version, final.node_ids) == (expected.version, expected.node_ids)
    assert [(e.node_id, e.n, e.mean, e.ci_low) for e in final.nodes] == [
        (e.node_id, e.n, e.mean, e.ci_low) for e in expected.nodes]


Stats = tuple[int, float, float]  # a node's n, mean and std in one window
Delta = tuple[int, list[str], list[str]]  # version, nodes added, nodes removed


def delta_summary(delta: BlacklistDelta) -> Delta:
    return delta.version, sorted(e.node_id for e in delta.added), sorted(e.node_id for e in delta.removed)


class CleanRun(NamedTuple):
    """What an uninterrupted run publishes: the last snapshot, and each node's statistics in every window."""

    snapshot: BlacklistSnapshot
    windows: dict[tuple[str, int], Stats]  # (node, window end) -> statistics
    deltas: list[Delta]

    @property
    def last_window(self) -> int:
        return max(end for _, end in self.windows)


def clean_run(spec: str) -> CleanRun:
    windows: dict[tuple[str, int], Stats] = {}

    def keep(result: RankResult) -> None:
        windows.update(((s.node_id, s.window_end_us), (s.n, s.mean, s.std)) for s in result.ranking.node_scores())

    pipeline = LocalPipeline(Settings(), partitions=PARTITIONS, on_ranking=keep)
    deltas = [delta_summary(d) for d in pipeline.run(open_trace(spec), finish=False)]
    assert windows, "the trace ranks at least one period"
    return CleanRun(pipeline.blacklist, windows, deltas)


class Published(NamedTuple):
    """What the workers published: the last snapshot, and every node-scores record in the order of its node."""

    snapshot: BlacklistSnapshot
    scores: list[tuple[str, int, Stats]]  # (node, window end, statistics)
    deltas: list[Delta]

    def latest(self) -> dict[str, Stats]:
        return {node: stats for node, _, stats in self.scores}


def lags(port: int) -> dict[tuple[str, int], float]:
    """Records waiting on each source partition a worker holds, from its /metrics (empty: no answer)."""
    try:
        samples = scrape(port)
    except AssertionError:
        return {}
    return {(labels["topic"], int(labels["partition"])): value for (name, raw), value in samples.items()
            if name == "laggard_consumer_lag_records" for labels in (dict(raw),)}


def _published(bootstrap: str) -> Published | None:
    from tests.integration.support import decoded

    snapshots = decoded(bootstrap, "blacklist-snapshot")
    scores = [(s.node_id, s.window_end_us, (s.n, s.mean, s.std)) for s in decoded(bootstrap, "node-scores")]
    deltas = [delta_summary(d) for d in decoded(bootstrap, "blacklist-deltas")]
    return Published(snapshots[-1], scores, deltas) if snapshots else None


def wait_until_settled(bootstrap: str, port: int, clean: CleanRun, log: Path, timeout_s: float) -> Published:
    """What the workers published once the one on ``port`` holds every source partition, has read all of
    them, the last window of the clean run is out and nothing more comes between two looks."""
    every_source = 2 * PARTITIONS + 1  # task-events, job-events, the ranking feed
    previous: list[Published | None] = [None]

    def settled() -> Published | None:
        waiting = lags(port)
        if len(waiting) < every_source or any(waiting.values()):
            previous[0] = None
            return None
        now = _published(bootstrap)
        if now is None or now.snapshot.version < clean.snapshot.version or max(
                (end for _, end, _ in now.scores), default=-1) < clean.last_window:
            return None
        quiet, previous[0] = now == previous[0], now
        return now if quiet else None

    result: Published = wait_until(settled, timeout_s, "the worker to settle on the clean run's last window",
                                   log, every_s=3)
    return result


def assert_same_decisions(published: Published, clean: CleanRun) -> None:
    """The deltas (each version once, in order) and the final snapshot are the clean run's."""
    assert published.deltas == clean.deltas
    assert_same_snapshot(published.snapshot, clean.snapshot)


def score_differences(published: Published, clean: CleanRun) -> list[tuple[str, int, Stats, Stats | None]]:
    """Every node-scores record whose statistics are not the clean run's for its node and window (an event
    lost or counted twice anywhere shows in the windows after it), and each node's latest record that does not
    hold the statistics of the clean run's last window."""
    wrong = [(node, end, stats, clean.windows.get((node, end))) for node, end, stats in published.scores
             if clean.windows.get((node, end)) != stats]
    latest = published.latest()
    return wrong + [(node, clean.last_window, latest.get(node, (0, 0.0, 0.0)), stats)
                    for (node, end), stats in clean.windows.items()
                    if end == clean.last_window and latest.get(node) != stats]


def assert_same_end(published: Published, clean: CleanRun) -> None:
    """The clean run's decisions, and its statistics in every window."""
    assert_same_decisions(published, clean)
    wrong = score_differences(published, clean)
    assert not wrong, f"{len(wrong)} of {len(published.scores)} scores differ from the clean run's: {wrong[:5]}"
