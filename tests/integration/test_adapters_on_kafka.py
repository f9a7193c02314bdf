"""Scheduler adapters against the real broker: snapshots and deltas published to the real blacklist topics,
each adapter run as the `laggard adapter ...` command a user runs, and its output checked.

Every test uses its own cluster id, so tests share the topics without seeing each other's records.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from streams import kafka_clients
from streams.core.events import BlacklistDelta, BlacklistEntry, BlacklistSnapshot, RemovedEntry
from streams.serde import codec
from streams.serde.topics import BLACKLIST_DELTAS, BLACKLIST_SNAPSHOT
from streams.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
HEALTH_SCRIPT = ROOT / "scripts" / "yarn-health-check"


def laggard_command() -> list[str]:
    script = Path(sys.executable).parent / "laggard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "laggard"]


@pytest.fixture(scope="module")
def topics(bootstrap: str) -> str:
    kafka_clients.create_topics(Settings(bootstrap_servers=bootstrap), (BLACKLIST_DELTAS, BLACKLIST_SNAPSHOT))
    return bootstrap


@pytest.fixture
def cluster() -> str:
    return f"it-{uuid.uuid4().hex[:10]}"


def entry(node: str) -> BlacklistEntry:
    return BlacklistEntry(node, 0, 11, 1.3, 0.4, 1.0, 1.6, f"{node}: mean z 1.3, 95% CI [1.0, 1.6] over 11 tasks")


def delta(cluster: str, version: int, added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> BlacklistDelta:
    gone = tuple(RemovedEntry(n, f"{n}: no recent evidence") for n in removed)
    return BlacklistDelta(
        cluster, version, version * 300_000_000, "pcores", 0, 3_600_000_000, tuple(entry(n) for n in added), gone
    )


def snapshot(cluster: str, version: int, nodes: tuple[str, ...]) -> BlacklistSnapshot:
    return BlacklistSnapshot(
        cluster, version, version * 300_000_000, "pcores", 0, 3_600_000_000, tuple(entry(n) for n in nodes)
    )


def publish(bootstrap: str, *records: BlacklistDelta | BlacklistSnapshot) -> None:
    producer = kafka_clients.producer(Settings(bootstrap_servers=bootstrap))
    try:
        for record in records:
            topic = BLACKLIST_DELTAS if isinstance(record, BlacklistDelta) else BLACKLIST_SNAPSHOT
            producer.send(topic.name, key=codec.encode_key(record.cluster_id), value=codec.encode(record))
        producer.flush()
    finally:
        producer.close()


def adapter(bootstrap: str, cluster: str, kind: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run `laggard adapter KIND ... --once --json`; returns (status, outcome, log)."""
    command = [
        *laggard_command(),
        "adapter",
        kind,
        "--bootstrap",
        bootstrap,
        "--cluster-id",
        cluster,
        "--once",
        "--json",
        "--retry-wait",
        "0.2",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    outcome = orjson.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, outcome, done.stderr


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def state_of(path: Path) -> tuple[int | None, list[str]]:
    document = json.loads(path.read_text())
    return document["version"], document["applied"]


# --- file -------------------------------------------------------------------------------------------------


def test_file_adapter_follows_deltas_resyncs_on_a_gap_and_resumes_after_a_restart(
    topics: str, cluster: str, tmp_path: Path
) -> None:
    blacklist, state, log = tmp_path / "blacklist.txt", tmp_path / "state.json", tmp_path / "adapter.log"
    publish(
        topics, delta(cluster, 1, ("n1", "n2")), snapshot(cluster, 1, ("n1", "n2")), delta(cluster, 2, ("n3",), ("n1",))
    )
    command = [
        *laggard_command(),
        "adapter",
        "file",
        "--bootstrap",
        topics,
        "--cluster-id",
        cluster,
        "--path",
        str(blacklist),
        "--state-file",
        str(state),
        "--known-nodes",
        "40",
        "--retry-wait",
        "0.2",
    ]
    with log.open("w") as log_file:
        follower = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            wait_for(lambda: read(blacklist) == "n2\nn3\n", "versions 1 and 2 in the file")
            # Version 3 is lost: delta 4 arrives after a gap, and the snapshot of version 4 closes it.
            publish(topics, snapshot(cluster, 4, ("n2", "n3", "n5")), delta(cluster, 4, ("n5",)))
            wait_for(lambda: read(blacklist) == "n2\nn3\nn5\n", "the resynchronised set")
            wait_for(lambda: state_of(state)[0] == 4, "version 4 in the state file")
        finally:
            follower.send_signal(signal.SIGTERM)  # the restart: stop mid-way
            follower.wait(timeout=60)
    text = log.read_text()
    assert "version gap: expected 3, got 4: resynchronising from the snapshot" in text
    assert "blacklist n3 (delta version 2): n3: mean z 1.3" in text
    assert "release n1 (delta version 2): n1: no recent evidence" in text

    publish(topics, delta(cluster, 5, (), ("n2",)))
    status, outcome, log_text = adapter(
        topics, cluster, "file", "--path", str(blacklist), "--state-file", str(state), "--known-nodes", "40"
    )
    assert status == 0, log_text
    assert read(blacklist) == "n3\nn5\n"
    # After the restart only version 5 was applied; the snapshot and deltas 1-4 were recognised as done.
    assert (outcome["applied"], outcome["version"], outcome["blacklist"]) == (1, 5, ["n3", "n5"])
    assert "duplicate: version 4 is already applied" in log_text


def test_a_gap_the_snapshot_cannot_close_yet_stops_a_once_run_without_losing_anything(
    topics: str, cluster: str, tmp_path: Path
) -> None:
    blacklist, state = tmp_path / "blacklist.txt", tmp_path / "state.json"
    args = ("--path", str(blacklist), "--state-file", str(state), "--max-fraction", "1")
    publish(
        topics,
        snapshot(cluster, 1, ("a",)),
        delta(cluster, 1, ("a",)),
        delta(cluster, 2, ("b",)),
        delta(cluster, 4, ("d",)),
    )
    status, outcome, log_text = adapter(topics, cluster, "file", *args)
    assert status == 3 and outcome["version"] == 2, log_text
    assert "snapshot is behind the deltas" in log_text
    assert read(blacklist) == "a\nb\n"
    publish(topics, snapshot(cluster, 3, ("a", "b", "c")))
    status, outcome, log_text = adapter(topics, cluster, "file", *args)
    assert status == 0, log_text
    assert read(blacklist) == "a\nb\nc\nd\n" and outcome["version"] == 4


def test_a_delta_over_the_cap_is_refused_and_the_state_is_unchanged(topics: str, cluster: str, tmp_path: Path) -> None:
    blacklist, state = tmp_path / "blacklist.txt", tmp_path / "state.json"
    args = ("--path", str(blacklist), "--state-file", str(state), "--known-nodes", "10", "--max-fraction", "0.2")
    publish(topics, snapshot(cluster, 1, ("n1",)), delta(cluster, 2, ("n2", "n3")))
    status, outcome, log_text = adapter(topics, cluster, "file", *args)
    assert status == 3
    assert outcome["refused"] == 1 and outcome["version"] == 1
    assert "REFUSED blacklist version 2 as a whole: blacklist would hold 3 of 10 known nodes" in log_text
    assert read(blacklist) == "n1\n"
    before = state.read_bytes()
    adapter(topics, cluster, "file", *args)  # refused again, loudly, on every run
    assert state.read_bytes() == before and read(blacklist) == "n1\n"


def test_a_blacklist_file_that_cannot_be_written_keeps_the_version_and_is_applied_once_it_can(
    topics: str, cluster: str, tmp_path: Path
) -> None:
    """A --path the adapter cannot write when a change comes (here under /proc, which takes no new file even for
    root; in production a full disk or a permission taken away) is a change the scheduler did not take: exit 3 with
    the file named and no state saved, as for a failed YARN refresh. It ended the adapter with "Error: ..." and exit
    1, and a long-running adapter with it instead of trying again."""
    blacklist, state = tmp_path / "blacklist.txt", tmp_path / "state.json"
    publish(topics, snapshot(cluster, 1, ("n1",)))
    args = ("--state-file", str(state), "--known-nodes", "20")
    status, outcome, log_text = adapter(topics, cluster, "file", "--path", "/proc/laggard-blacklist.txt", *args)
    assert status == 3 and outcome["version"] is None
    assert "cannot write /proc/laggard-blacklist.txt" in log_text and "Traceback" not in log_text
    assert not state.exists()
    status, outcome, _ = adapter(topics, cluster, "file", "--path", str(blacklist), *args)
    assert status == 0 and outcome["version"] == 1 and read(blacklist) == "n1\n"


def test_a_state_file_that_cannot_be_written_does_not_stop_the_adapter(topics: str, cluster: str,
                                                                        tmp_path: Path) -> None:
    """The scheduler took the change; the state file could not be saved (here under /proc; a full disk in
    production). It ended the adapter with an OSError; then it was an error line only, and --once exited 0, so a
    cron job never saw it. Now the blacklist is applied, the summary and the JSON name the state file, and --once
    exits 3 until the state can be saved."""
    blacklist, state = tmp_path / "blacklist.txt", tmp_path / "state.json"
    publish(topics, snapshot(cluster, 1, ("n4",)))
    args = ("--path", str(blacklist), "--known-nodes", "20")
    status, outcome, log_text = adapter(topics, cluster, "file", *args, "--state-file", "/proc/laggard-state.json")
    assert status == 3 and outcome["version"] == 1 and outcome["in_sync"] and read(blacklist) == "n4\n", log_text
    assert outcome["state_problem"].startswith("state file /proc/laggard-state.json not saved"), outcome
    assert "state file /proc/laggard-state.json not saved" in log_text and "Traceback" not in log_text
    status, outcome, _ = adapter(topics, cluster, "file", *args, "--state-file", str(state))
    assert status == 0 and outcome["state_problem"] is None and state.exists()


def test_a_cluster_id_with_no_record_names_the_clusters_the_topics_hold(topics: str, cluster: str,
                                                                         tmp_path: Path) -> None:
    """`--cluster-id` with a typo followed nothing and said only "no blacklist applied yet", exit 0. (Snapshots are
    looked up by cluster id; the deltas of every cluster pass by, and name the clusters there are.)"""
    publish(topics, delta(cluster, 1, ("n7",)), snapshot(cluster, 1, ("n7",)))
    status, outcome, log_text = adapter(topics, f"{cluster}-typo", "file", "--path", str(tmp_path / "b.txt"),
                                        "--state-file", str(tmp_path / "s.json"), "--known-nodes", "20")
    assert status == 0 and outcome["version"] is None and cluster in outcome["other_clusters"], outcome
    assert "the topics hold blacklists of other clusters only" in log_text and cluster in log_text, log_text


# --- yarn -------------------------------------------------------------------------------------------------


def test_yarn_adapter_keeps_exclude_file_and_flags_and_refreshes_once_per_change(
    topics: str, cluster: str, tmp_path: Path
) -> None:
    exclude, health, calls = tmp_path / "yarn.exclude.xml", tmp_path / "health", tmp_path / "refresh-calls"
    args = (
        "--exclude-file",
        str(exclude),
        "--health-dir",
        str(health),
        "--state-file",
        str(tmp_path / "s.json"),
        "--refresh-command",
        f"sh -c 'echo refreshed >> {calls}'",
        "--known-nodes",
        "20",
    )
    publish(topics, snapshot(cluster, 2, ("w1", "w2")), delta(cluster, 3, ("w3",), ("w1",)))
    status, outcome, log_text = adapter(topics, cluster, "yarn", *args)
    assert status == 0, log_text
    assert "<host><name>w2</name></host>" in exclude.read_text() and "w1" not in exclude.read_text()
    assert sorted(p.name for p in health.iterdir()) == ["w2", "w3"]
    assert read(calls).count("refreshed") == 2  # the snapshot and delta 3

    def health_check(node: str) -> str:
        return subprocess.run(
            ["sh", str(HEALTH_SCRIPT), str(health), node], capture_output=True, text=True, check=True
        ).stdout

    assert health_check("w3").startswith("ERROR node w3 is blacklisted: laggard: w3: mean z 1.3")
    assert health_check("w1") == ""

    status, outcome, _ = adapter(topics, cluster, "yarn", *args)  # a restart with nothing new
    assert status == 0 and outcome["applied"] == 0
    assert read(calls).count("refreshed") == 2


def test_yarn_adapter_keeps_the_version_when_the_refresh_fails(topics: str, cluster: str, tmp_path: Path) -> None:
    exclude, state = tmp_path / "yarn.exclude", tmp_path / "s.json"
    publish(topics, snapshot(cluster, 1, ("w1",)), delta(cluster, 2, ("w2",)))
    base = ("--exclude-file", str(exclude), "--state-file", str(state), "--known-nodes", "20")
    status, outcome, log_text = adapter(topics, cluster, "yarn", *base, "--refresh-command", "sh -c 'exit 7'")
    assert status == 3 and outcome["version"] is None
    assert "exited with status 7" in log_text
    status, outcome, _ = adapter(topics, cluster, "yarn", *base, "--refresh-command", "true")
    assert status == 0 and outcome["version"] == 2 and exclude.read_text() == "w1\nw2\n"


# --- webhook ----------------------------------------------------------------------------------------------


class Receiver(http.server.BaseHTTPRequestHandler):
    up: ClassVar[bool] = True
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if Receiver.up:
            Receiver.received.append(orjson.loads(body))
        self.send_response(200 if Receiver.up else 503)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.up, Receiver.received = True, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/laggard"
    server.shutdown()
    server.server_close()


def test_webhook_adapter_delivers_every_change_once_even_while_the_endpoint_is_down(
    topics: str, cluster: str, tmp_path: Path, receiver: str
) -> None:
    args = (
        "--url",
        receiver,
        "--attempts",
        "2",
        "--backoff",
        "0.05",
        "--state-file",
        str(tmp_path / "s.json"),
        "--known-nodes",
        "50",
    )
    publish(topics, snapshot(cluster, 1, ("n1",)), delta(cluster, 1, ("n1",)), delta(cluster, 2, ("n2",)))
    Receiver.up = False
    status, outcome, log_text = adapter(topics, cluster, "webhook", *args)
    assert status == 3 and outcome["version"] is None, log_text
    assert "POST" in log_text and "503" in log_text

    Receiver.up = True
    publish(topics, delta(cluster, 3, (), ("n1",)))
    status, outcome, log_text = adapter(topics, cluster, "webhook", *args)
    assert status == 0, log_text
    assert [(m["kind"], m["version"]) for m in Receiver.received] == [("snapshot", 1), ("delta", 2), ("delta", 3)]
    assert Receiver.received[1]["added"][0]["reason"].startswith("n2: mean z 1.3")
    assert Receiver.received[2]["blacklist"] == ["n2"]

    status, _, _ = adapter(topics, cluster, "webhook", *args)  # restart: nothing is sent twice
    assert status == 0 and len(Receiver.received) == 3


# --- Kubernetes: a contract test, since no API server runs here --------------------------------------------


class FakeApiServer(http.server.BaseHTTPRequestHandler):
    """The node calls of the Kubernetes API the adapter uses, with resourceVersion checks.

    The first PATCH of each node answers 409 Conflict (as if another controller wrote the node first), the
    way a real API server answers a patch whose metadata.resourceVersion is stale.
    """

    nodes: ClassVar[dict[str, dict[str, Any]]] = {}
    conflicted: ClassVar[set[str]] = set()
    patches: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/api/v1/nodes":
            self._send(
                200,
                {
                    "apiVersion": "v1",
                    "kind": "NodeList",
                    "metadata": {"resourceVersion": "1"},
                    "items": list(self.nodes.values()),
                },
            )
        else:
            name = self.path.split("?")[0].rsplit("/", 1)[-1]
            self._node_or_404(name, lambda node: self._send(200, node))

    def do_PATCH(self) -> None:
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        patch = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.patches.append((name, self.headers["Content-Type"], patch))

        def apply(node: dict[str, Any]) -> None:
            sent = patch.get("metadata", {}).get("resourceVersion")
            if name not in self.conflicted:
                self.conflicted.add(name)
                self._bump(node)
            if sent != node["metadata"]["resourceVersion"]:
                self._send(
                    409,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "Conflict",
                        "code": 409,
                        "message": f"the object has been modified; rv {sent} is stale",
                    },
                )
                return
            merged = merge_patch(node, {k: v for k, v in patch.items()})
            merged["metadata"]["resourceVersion"] = node["metadata"]["resourceVersion"]
            self._bump(merged)
            self.nodes[name] = merged
            self._send(200, merged)

        self._node_or_404(name, apply)

    def _node_or_404(self, name: str, then: Callable[[dict[str, Any]], None]) -> None:
        if name in self.nodes:
            then(self.nodes[name])
        else:
            self._send(
                404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
            )

    @staticmethod
    def _bump(node: dict[str, Any]) -> None:
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = orjson.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def fake_node(name: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "10", "annotations": {"zone": "a"}},
        "spec": {},
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[Path]:
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    by_hand = {"key": "laggard.io/slow", "value": "true", "effect": "NoSchedule"}
    FakeApiServer.nodes = {f"k{i}": fake_node(f"k{i}") for i in range(10)}
    FakeApiServer.nodes["k1"] = fake_node("k1", [gpu])
    FakeApiServer.nodes["k9"] = fake_node("k9", [by_hand])  # an operator's taint with laggard's key
    FakeApiServer.conflicted, FakeApiServer.patches = set(), []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
                "users": [{"name": "laggard", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "laggard"}}],
            }
        )
    )
    yield kubeconfig
    server.shutdown()
    server.server_close()


def test_k8s_adapter_contract_against_a_fake_api_server_because_no_api_server_runs_here(
    topics: str, cluster: str, tmp_path: Path, fake_api: Path
) -> None:
    """Contract test: no Kubernetes API server runs here, so the real kubernetes client (through the real
    `laggard adapter k8s` command and a kubeconfig) talks to a local HTTP server that implements the node
    calls it makes (GET /api/v1/nodes, GET and PATCH /api/v1/nodes/NAME) with resourceVersion conflicts.
    It checks the requests the adapter sends, not a real API server's behaviour beyond them.
    """
    args = ("--kubeconfig", str(fake_api), "--state-file", str(tmp_path / "s.json"), "--max-fraction", "0.3")
    publish(topics, snapshot(cluster, 1, ("k1", "k2")), delta(cluster, 2, ("k9",)))
    status, outcome, log_text = adapter(topics, cluster, "k8s", *args)
    assert status == 0, log_text
    nodes = FakeApiServer.nodes
    ours = {"key": "laggard.io/slow", "value": "true", "effect": "NoSchedule"}
    assert nodes["k1"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        ours,
    ]
    assert nodes["k2"]["metadata"]["annotations"] == {"zone": "a", "laggard.io/tainted-by": f"laggard/{cluster}"}
    assert "laggard.io/tainted-by" not in nodes["k9"]["metadata"]["annotations"]  # not ours to claim
    assert "409 Conflict" in log_text
    for _, content_type, patch in FakeApiServer.patches:
        assert content_type == "application/merge-patch+json"
        assert patch["metadata"]["resourceVersion"]

    # Release: only what laggard added goes; a fourth node would exceed 30% of the 10 listed nodes.
    publish(topics, delta(cluster, 3, (), ("k2", "k9")), delta(cluster, 4, ("k3", "k4", "k5")))
    status, outcome, log_text = adapter(topics, cluster, "k8s", *args)
    assert status == 3 and outcome["version"] == 3 and outcome["refused"] == 1
    assert "4 of 10 known nodes" in log_text
    assert "taints" not in nodes["k2"]["spec"] and "laggard.io/tainted-by" not in nodes["k2"]["metadata"]["annotations"]
    assert nodes["k9"]["spec"]["taints"] == [ours]  # the operator's taint stays
    assert "taints" not in nodes["k3"]["spec"]


def test_every_adapter_runs_against_the_broker_in_dry_run_without_acting(
    topics: str, cluster: str, tmp_path: Path
) -> None:
    publish(topics, snapshot(cluster, 1, ("d1",)))
    blacklist = tmp_path / "b.txt"
    status, outcome, log_text = adapter(
        topics,
        cluster,
        "file",
        "--path",
        str(blacklist),
        "--dry-run",
        "--max-fraction",
        "1",
        "--state-file",
        str(tmp_path / "s.json"),
    )
    assert status == 0 and outcome["version"] == 1 and outcome["dry_run"]
    assert "[dry-run] would blacklist d1 (snapshot version 1)" in log_text
    assert "[dry-run] would apply snapshot version 1 through file: 1 node(s) blacklisted" in log_text
    assert not blacklist.exists() and not (tmp_path / "s.json").exists()
    assert os.listdir(tmp_path) == []
