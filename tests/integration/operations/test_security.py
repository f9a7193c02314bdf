"""laggard against a broker that speaks only TLS and SASL/SCRAM to it: the project's own broker with an SSL and a
SASL_SSL listener, its certificate signed by a CA this test makes with openssl, and a SCRAM user created when its
storage is formatted. Topics, the replayer, the worker and every adapter that reads Kafka (file, yarn, webhook, k8s;
the scheduler extender reads the file adapter's output, not Kafka) connect with the settings an operator sets, and
the blacklist is the one the in-process run finds. A wrong password and a certificate from a CA nobody trusts are
each one line on stderr and exit 1, within seconds, from each command."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from laggard import kafka_local
from streams.core.events import BlacklistSnapshot
from tests.integration.operations.support import (
    PARTITIONS,
    Certificates,
    FakeKubernetesApi,
    fake_kubernetes,
    final_snapshot,
    get,
    make_certificates,
    own_secure_broker,
    scrape,
    start,
    stop,
    wait_until,
)
from tests.integration.support import LAGGARD

SPEC = "synthetic:nodes=40,slow=3,jobs=100,seed=3"
USER, PASSWORD = "alice", "alice-secret"
# A client left to itself retries for 30 s and then blames an unreachable broker ("no Kafka broker answers"); the
# refusal's own words show it was said at once. The bound only catches a hang: on 2 shared cores under a load of 12,
# four commands at a time took 5-24 s each, nearly all of it Python importing the command (kubernetes the slowest).
REFUSAL_BOUND_S = 45.0
K = TypeVar("K")


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[kafka_local.Broker, Certificates]]:
    root = tmp_path_factory.mktemp("secure")
    certificates = make_certificates(root / "tls")
    with own_secure_broker(root / "broker", certificates, ((USER, PASSWORD),)) as broker:
        yield broker, certificates


@pytest.fixture(scope="module")
def expected_later() -> Iterator[Future[BlacklistSnapshot]]:
    """The plaintext, in-process run's final snapshot, computed while the broker starts."""
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(final_snapshot, SPEC)


def client_env(broker: kafka_local.Broker, certificates: Certificates, protocol: str, *,
               mechanism: str = "SCRAM-SHA-512", password: str = PASSWORD, ca: Path | None = None) -> dict[str, str]:
    """The settings an operator sets, pointing at the broker's ``protocol`` listener only."""
    env = {"LAGGARD_BOOTSTRAP_SERVERS": broker.address(protocol), "LAGGARD_SECURITY_PROTOCOL": protocol,
           "LAGGARD_SSL_CAFILE": str(ca or certificates.ca)}
    if protocol == "SASL_SSL":
        env |= {"LAGGARD_SASL_MECHANISM": mechanism, "LAGGARD_SASL_USERNAME": USER, "LAGGARD_SASL_PASSWORD": password}
    return env


def run(args: list[str], env: dict[str, str], timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LAGGARD, *args], capture_output=True, text=True, timeout=timeout_s,
                          env=dict(os.environ, **env))


@dataclass
class Done:
    code: int | None
    out: str
    err: str
    seconds: float


def run_all(cases: dict[K, tuple[list[str], dict[str, str]]], parallel: int = 4,
            timeout_s: float = 120) -> dict[K, Done]:
    """Run each `laggard ARGS` with its environment, ``parallel`` at a time; each one's exit, output and time."""

    def one(case: K) -> Done:
        args, env = cases[case]
        began = time.monotonic()
        try:
            done = run(args, env, timeout_s)
        except subprocess.TimeoutExpired as exc:
            return Done(None, str(exc.stdout or ""), str(exc.stderr or ""), time.monotonic() - began)
        return Done(done.returncode, done.stdout, done.stderr, time.monotonic() - began)

    with ThreadPoolExecutor(parallel) as pool:
        return dict(zip(cases, pool.map(one, cases), strict=True))


def caught_up(metrics_port: int) -> bool:
    """Whether the worker holds partitions (it is in its group) and has read each to its end."""
    if get(metrics_port, "/metrics")[0] != 200:
        return False
    lags = [value for (name, _), value in scrape(metrics_port).items() if name == "laggard_consumer_lag_records"]
    return bool(lags) and not any(lags)


class Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        Receiver.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/laggard"
    server.shutdown()
    server.server_close()


@pytest.mark.timeout(400)
def test_the_pipeline_over_tls_and_sasl_lists_the_nodes_of_the_plaintext_run(
        expected_later: Future[BlacklistSnapshot], secure: tuple[kafka_local.Broker, Certificates], tmp_path: Path,
        receiver: str) -> None:
    broker, certificates = secure
    expected = expected_later.result()
    ssl, scram512 = client_env(broker, certificates, "SSL"), client_env(broker, certificates, "SASL_SSL")
    scram256 = client_env(broker, certificates, "SASL_SSL", mechanism="SCRAM-SHA-256")

    created = run(["topics", "create", "--partitions", str(PARTITIONS)], ssl)
    assert created.returncode == 0 and created.stdout.count("created") >= 9, created.stderr

    worker_log, adapter_log, blacklist = tmp_path / "worker.log", tmp_path / "adapter.log", tmp_path / "blacklist.txt"
    worker = start(["worker", "--partitions", str(PARTITIONS), "--web-port", "0"], worker_log,
                   LAGGARD_DATA_DIR=str(tmp_path / "faust"), **scram512)
    adapter = start(["adapter", "file", "--path", str(blacklist), "--state-file", str(tmp_path / "file.json"),
                     "--known-nodes", "40"], adapter_log, **scram256)
    try:
        replayed = run(["replay", "--trace", SPEC, "--json"], scram512)
        assert replayed.returncode == 0, replayed.stderr
        truth = set(json.loads(replayed.stdout)["ground_truth"]["slow_nodes"])
        wait_until(lambda: blacklist.exists() and (tmp_path / "file.json").exists()
                   and json.loads((tmp_path / "file.json").read_text())["version"] == expected.version, 150,
                   "the file adapter to apply the final version", worker_log, every_s=2)
        assert worker.poll() is None and adapter.poll() is None
    finally:
        for process in (adapter, worker):
            stop(process)
    assert set(blacklist.read_text().split()) == set(expected.node_ids) == truth

    # Meanwhile the worker again, over SSL this time (Faust's other credentials): it rejoins its group and holds
    # its partitions caught up. And every other adapter, once, over each kind of listener.
    metrics_port = kafka_local.free_ports(1)[0]
    again_log = tmp_path / "worker-ssl.log"
    again = start(["worker", "--web-port", "0", "--metrics-port", str(metrics_port)], again_log,
                  LAGGARD_DATA_DIR=str(tmp_path / "faust"), **ssl)
    once = ["--once", "--json", "--known-nodes", "40"]
    exclude = tmp_path / "yarn.exclude"
    try:
        with fake_kubernetes(tmp_path, [f"node-{i}" for i in range(40)]) as kubeconfig:
            adapters = run_all({
                "yarn": (["adapter", "yarn", *once, "--exclude-file", str(exclude), "--refresh-command", "true",
                          "--state-file", str(tmp_path / "yarn.json")], ssl),
                "webhook": (["adapter", "webhook", *once, "--url", receiver, "--state-file",
                             str(tmp_path / "hook.json")], scram256),
                "k8s": (["adapter", "k8s", *once, "--kubeconfig", str(kubeconfig), "--state-file",
                         str(tmp_path / "k8s.json")], ssl),
            })
        wait_until(lambda: caught_up(metrics_port), 120, "the worker over SSL to hold caught-up partitions", again_log)
    finally:
        stop(again)
    for done in adapters.values():
        assert done.code == 0, done.err
        outcome = json.loads(done.out)
        assert (outcome["version"], set(outcome["blacklist"])) == (expected.version, truth), done.err
    assert set(exclude.read_text().split()) == truth
    assert set(Receiver.received[0]["blacklist"]) == truth
    tainted = {name for name, node in FakeKubernetesApi.nodes.items() if node["spec"].get("taints")}
    assert tainted == truth


def test_a_wrong_password_or_an_untrusted_certificate_is_one_line_and_exit_1_from_every_command(
        secure: tuple[kafka_local.Broker, Certificates], tmp_path: Path) -> None:
    broker, certificates = secure
    wrong_password = client_env(broker, certificates, "SASL_SSL", password="not-the-password")
    untrusted = client_env(broker, certificates, "SSL", ca=certificates.stranger_ca)
    untrusted_sasl = client_env(broker, certificates, "SASL_SSL", ca=certificates.stranger_ca)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [
        {"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}], "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    state = ["--state-file", str(tmp_path / "state.json")]
    commands = {
        "topics": ["topics", "create"],
        "replay": ["replay", "--trace", SPEC],
        "worker": ["worker", "--web-port", "0"],
        "file adapter (following)": ["adapter", "file", "--path", str(tmp_path / "b.txt"), *state],
        "yarn adapter": ["adapter", "yarn", "--once", "--exclude-file", str(tmp_path / "x"), "--refresh-command",
                         "true", *state],
        "webhook adapter": ["adapter", "webhook", "--once", "--url", "http://127.0.0.1:9/", *state],
        "k8s adapter": ["adapter", "k8s", "--once", "--kubeconfig", str(kubeconfig), *state],
    }
    cases: dict[tuple[str, str], tuple[list[str], dict[str, str]]] = {
        (name, "wrong password"): (args, wrong_password) for name, args in commands.items()}
    for name in ("topics", "replay", "worker", "file adapter (following)"):
        cases[(name, "untrusted certificate")] = (commands[name], untrusted)
    cases[("worker", "untrusted certificate, SASL_SSL")] = (commands["worker"], untrusted_sasl)
    for env in (wrong_password, untrusted, untrusted_sasl):
        env["LAGGARD_DATA_DIR"] = str(tmp_path / "faust")

    problems = []
    for (name, why), done in run_all(cases, timeout_s=REFUSAL_BOUND_S + 60).items():
        lines = [line for line in done.err.splitlines() if line.strip()]
        wanted = "refused SASL user 'alice' (SCRAM-SHA-512)" if why == "wrong password" else "is not trusted"
        if done.code != 1 or len(lines) != 1 or not lines[0].startswith("Error: ") or wanted not in lines[0] \
                or done.out.strip() or done.seconds > REFUSAL_BOUND_S:
            problems.append(f"{name}, {why}: exit {done.code} after {done.seconds:.0f} s, stdout {done.out[:200]!r}, "
                            f"stderr:\n{done.err[-2000:]}")
    assert not problems, "\n".join(problems)
