"""The scheduler-extender endpoint over real HTTP on 127.0.0.1: Kubernetes' ExtenderArgs in, ExtenderFilterResult
and HostPriorityList out; bad bodies get a 400 with the reason and the server keeps answering."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.extender import BlacklistFile, Extender
from streams.core.avoidance.adviser import Adviser
from streams.core.avoidance.status import NodeStatus
from streams.core.avoidance.trees import CartTrees

BUSY = {"node-busy": 16}


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}}  # fmt: skip


# The shape of Kubernetes' ExtenderArgs (k8s.io/kube-scheduler/extender/v1): Go field names, no JSON tags.
ARGS = {
    "Pod": {
        "metadata": {"name": "wordcount-map-7", "namespace": "default", "annotations": {"laggard.io/task-type": "map"}},
        "spec": {
            "containers": [
                {"name": "map", "image": "busybox", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
            ]
        },
    },
    "Nodes": {"metadata": {}, "items": [_node("node-calm"), _node("node-busy"), _node("node-listed")]},
    "NodeNames": None,
}


def _trees() -> CartTrees:
    trees = CartTrees(max_depth=1, min_samples_leaf=1)
    trees.fit("map", [{"running": float(r)} for r in range(20)], [0.0] * 11 + [1.5] * 9)
    return trees


def _status(node: str, kind: str) -> NodeStatus:
    if node == "node-broken":
        raise RuntimeError("status store unavailable")  # a fault below the extender, for the 500 test
    return NodeStatus(node, 0, running=BUSY.get(node, 2))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    blacklist = tmp_path / "blacklist.txt"
    blacklist.write_text("node-listed\n")
    extender = Extender(Adviser(_trees(), 1.0), _status, BlacklistFile(blacklist))
    port = _free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(extender.app(body_timeout_s=BODY_TIMEOUT_S))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    import threading

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)


BODY_TIMEOUT_S = 3.0  # the server's wait for a body in these tests (30 s deployed)


def _raw(url: str, head: bytes, body: bytes) -> tuple[int, Any, float]:
    """A POST written on a socket as given (its Content-Length may lie): status, JSON answer, seconds to it."""
    host, port = url.removeprefix("http://").split(":")
    began = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    took = time.monotonic() - began
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1]), took


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def test_a_body_declared_over_the_limit_is_refused_at_once_with_a_json_413(server: str) -> None:
    """Refused on its declared length, before a byte of it is read (it used to be read to the limit, 256 MiB of
    memory, and answered in plain text)."""
    status, result, took = _raw(server, b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 999999999", b"{}")
    assert status == 413 and "999,999,999 bytes is over the 256 MiB" in result["Error"]
    assert took < BODY_TIMEOUT_S  # answered, not waited out


def test_a_body_that_never_arrives_is_answered_408_after_the_timeout_and_the_server_goes_on(server: str) -> None:
    """A client that declares more than it sends used to hold its request open for ever (no answer after 150 s).
    A body that keeps coming, however slowly, is read (the limit is on silence, not on the whole body)."""
    status, result, _ = _raw(server, b"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000", b"{}")
    assert status == 408 and result["Error"] == "no byte of the body came for 3 s (2 of 1,000 declared received)"
    assert _post(f"{server}/filter", json.dumps(ARGS).encode())[0] == 200


def test_a_body_that_keeps_coming_slowly_is_read_whatever_it_takes_in_all(server: str) -> None:
    """Five pieces a second apart: longer than the server's wait in all, never silent that long."""
    body = json.dumps({"Pod": ARGS["Pod"], "NodeNames": ["node-calm", "node-busy"]}).encode()
    host, port = server.removeprefix("http://").split(":")
    pieces = [body[k * len(body) // 5:(k + 1) * len(body) // 5] for k in range(5)]
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
        for piece in pieces:
            time.sleep(BODY_TIMEOUT_S / 3)
            sock.sendall(piece)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def _post(url: str, body: bytes) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session, session.post(url, data=body,
                                                                    headers={"Content-Type": "application/json"}) as r:
            return r.status, await r.json()

    return asyncio.run(go())


def test_filter_keeps_the_calm_node_and_says_why_the_others_failed(server: str) -> None:
    status, result = _post(f"{server}/filter", json.dumps(ARGS).encode())
    assert status == 200
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["node-calm"]
    assert set(result["FailedNodes"]) == {"node-busy", "node-listed"}
    assert "running tasks 16 >" in result["FailedNodes"]["node-busy"]
    assert "blacklist" in result["FailedNodes"]["node-listed"]
    assert result["Error"] == "" and result["FailedAndUnresolvableNodes"] == {}


def test_filter_with_node_names_answers_node_names(server: str) -> None:
    args = {"Pod": ARGS["Pod"], "NodeNames": ["node-calm", "node-busy"]}
    status, result = _post(f"{server}/filter", json.dumps(args).encode())
    assert status == 200 and result["NodeNames"] == ["node-calm"] and result["Nodes"] is None


def test_prioritize_scores_the_calm_node_above_the_busy_and_listed_ones(server: str) -> None:
    status, result = _post(f"{server}/prioritize", json.dumps(ARGS).encode())
    assert status == 200
    scores = {entry["Host"]: entry["Score"] for entry in result}
    assert set(scores) == {"node-calm", "node-busy", "node-listed"}
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["node-calm"] > scores["node-busy"] and scores["node-listed"] == 0


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"Pod": {}}', b'{"NodeNames": [3]}', b"\xff\xfe",
                                  # these were 500s with a traceback on the server's stderr
                                  b'{"Pod": {"metadata": "x"}, "NodeNames": ["a"]}',
                                  b'{"Pod": {"metadata": {"labels": ["a"]}}, "NodeNames": ["a"]}',
                                  b'{"Nodes": {"items": [{"metadata": "x"}]}}'])
def test_a_bad_body_gets_a_400_with_a_reason_and_the_server_goes_on(server: str, body: bytes) -> None:
    status, result = _post(f"{server}/filter", body)
    assert status == 400 and result["Error"]
    assert _post(f"{server}/filter", json.dumps(ARGS).encode())[0] == 200


@pytest.mark.parametrize(("value", "words"), [(3, "number 3"), (True, "boolean true"), (["map"], 'array ["map"]')])
def test_a_task_type_that_is_not_a_string_is_refused_not_judged_as_its_text(server: str, value: Any,
                                                                           words: str) -> None:
    """`"laggard.io/task-type": 3` was judged as type "3" (no tree: allowed everywhere), `true` as "True": Kubernetes
    labels and annotations are strings, so such a body is not a pod's, and the caller must hear it."""
    pod = {"metadata": {"annotations": {"laggard.io/task-type": value}}}
    status, result = _post(f"{server}/filter", json.dumps({"Pod": pod, "NodeNames": ["node-busy"]}).encode())
    assert status == 400 and "laggard.io/task-type must be a string" in result["Error"] and words in result["Error"]
    quoted = {"metadata": {"annotations": {"laggard.io/task-type": "map"}}}  # the same pod with its type as a string
    status, result = _post(f"{server}/filter", json.dumps({"Pod": quoted, "NodeNames": ["node-busy"]}).encode())
    assert status == 200 and "node-busy" in result["FailedNodes"]  # judged by the map tree: busy, avoided


def test_a_node_list_of_a_large_cluster_is_read_not_refused_as_too_large(server: str) -> None:
    """Without nodeCacheCapable the scheduler sends whole Node objects: aiohttp's 1 MiB default answered 413 (as
    plain text) from about a hundred nodes with their images listed, and every pod failed to schedule."""
    images = [{"names": [f"registry.example/team/image-{i}@sha256:{'0' * 64}"], "sizeBytes": 1 << 28}
              for i in range(50)]
    nodes = [{**_node(f"node-{n:04d}"), "status": {"images": images}} for n in range(300)]
    body = json.dumps({"Pod": ARGS["Pod"], "Nodes": {"items": nodes}}).encode()
    assert len(body) > 2 << 20
    status, result = _post(f"{server}/filter", body)
    assert status == 200 and len(result["Nodes"]["items"]) == 300


def test_a_pod_type_with_no_tree_is_allowed_and_warned_about_once(server: str, caplog) -> None:
    import logging

    pod = {"metadata": {"annotations": {"laggard.io/task-type": "gpu"}}}
    with caplog.at_level(logging.WARNING, logger="laggard.adapters"):
        for _ in range(3):
            status, result = _post(f"{server}/filter", json.dumps({"Pod": pod, "NodeNames": ["node-busy"]}).encode())
            assert status == 200 and result["NodeNames"] == ["node-busy"]
    warnings = [r.getMessage() for r in caplog.records if "no tree for task type 'gpu'" in r.getMessage()]
    assert len(warnings) == 1 and "trees: map" in warnings[0] and "laggard.io/task-type" in warnings[0]


def test_serve_judges_pods_of_no_type_by_the_pooled_tree_says_its_port_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`advise serve --port 0` printed "http://127.0.0.1:0"; a pod without the task-type annotation, on a trace
    whose tasks have types, got "no tree for task type 'all'": every node allowed, Score 5 for all."""
    import signal
    import subprocess
    import sys
    import time

    trace = "synthetic:nodes=20,slow=0,jobs=60,shape=6,interarrival=45,load=2,seed=3"  # types compute and memory
    err = tmp_path / "serve.err"
    with open(err, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "laggard", "advise", "serve", "--trace", trace, "--port",
                                    "0"], stderr=out, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "scheduler extender on" not in err.read_text() and process.poll() is None:
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.2)
        text = err.read_text()
        assert "all (every type: pods without the laggard.io/task-type annotation or label)" in text, text
        port = int(text.split("scheduler extender on http://127.0.0.1:")[1].split(" ")[0])
        assert port > 0
        status, result = _post(f"http://127.0.0.1:{port}/filter",
                               json.dumps({"Pod": {}, "NodeNames": ["node-01", "node-02"]}).encode())
        assert status == 200 and result["Error"] == ""
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    text = err.read_text()
    assert "no tree for task type 'all'" not in text and "scheduler extender stopped" in text


def test_an_internal_fault_is_a_500_with_the_reason_and_the_server_goes_on(server: str) -> None:
    status, result = _post(f"{server}/filter", json.dumps({"Pod": ARGS["Pod"], "NodeNames": ["node-broken"]}).encode())
    assert status == 500 and "status store unavailable" in result["Error"]
    assert _post(f"{server}/filter", json.dumps(ARGS).encode())[0] == 200


def _metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith(name + "{") and ",".join(sorted(head[len(name) + 1:-1].split(","))) == wanted:
            return float(value)
    return 0.0


def test_metrics_count_requests_by_verb_nodes_by_verdict_and_errors(server: str) -> None:
    import urllib.request

    from streams.health import Health, serve

    metrics = serve(0, Health(60.0))
    url = f"http://127.0.0.1:{metrics.server_port}/metrics"
    try:
        def read() -> str:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return str(answer.read().decode())

        before = read()
        _post(f"{server}/filter", json.dumps(ARGS).encode())
        _post(f"{server}/prioritize", json.dumps(ARGS).encode())
        _post(f"{server}/filter", b"{not json")
        after = read()
    finally:
        metrics.shutdown()
        metrics.server_close()
    grew = {
        key: _metric(after, name, **labels) - _metric(before, name, **labels)
        for key, (name, labels) in {
            "filter": ("laggard_extender_requests_total", {"verb": "filter"}),
            "prioritize": ("laggard_extender_requests_total", {"verb": "prioritize"}),
            "avoided": ("laggard_extender_nodes_total", {"verb": "filter", "verdict": "avoided"}),
            "listed": ("laggard_extender_nodes_total", {"verb": "filter", "verdict": "listed"}),
            "allowed": ("laggard_extender_nodes_total", {"verb": "filter", "verdict": "allowed"}),
            "bad": ("laggard_extender_errors_total", {"kind": "bad-request"}),
        }.items()
    }  # fmt: skip
    assert grew == {"filter": 1, "prioritize": 1, "avoided": 1, "listed": 1, "allowed": 1, "bad": 1}


def test_live_status_follows_records_and_comes_back_from_its_state_file(tmp_path: Path) -> None:
    from adapters.extender import LiveStatus
    from streams.core.avoidance.status import NodeStatusTracker
    from streams.core.events import NormalizedTask, TaskStart

    live = LiveStatus(NodeStatusTracker())
    for i in range(3):
        live.apply(TaskStart("j", str(i), 0, "node-a", 1_000_000 * (i + 1), cpu_request=0.3), "task-events:0", i + 1)
    live.apply(NormalizedTask("k", "0", 0, "node-a", 2_500_000, 1_000_000, 1.7), "node-samples:0", 8)
    assert live.status("node-a", "").running == 3 and live.status("node-a", "").score == 1.7
    path = tmp_path / "extender-state.json"
    live.save(path)
    again = LiveStatus.load(path)
    assert again is not None
    assert again.offsets == {"task-events:0": 3, "node-samples:0": 8} and again.now_us == 3_000_000
    assert again.status("node-a", "") == live.status("node-a", "")
    path.write_text('{"format": "laggard-adapter-state/1"}')
    assert LiveStatus.load(path) is None  # someone else's file: a cold start, not a crash


def test_a_state_file_that_cannot_be_written_is_logged_once_and_the_feed_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`advise serve --kafka --state PATH` on a path it cannot write: the feed's thread died of the save's error and
    the server went on answering with frozen node status. Now a failed save is one warning until one works."""
    from adapters.extender import LiveStatus
    from adapters.extender_feed import StatusFeed
    from streams.core.avoidance.status import NodeStatusTracker

    path = tmp_path / "state.json"
    path.mkdir()  # a directory where the file goes: the atomic replace fails
    feed = StatusFeed(None, LiveStatus(NodeStatusTracker()), path)
    with caplog.at_level(logging.WARNING, logger="laggard.adapters"):
        feed._save()
        feed._save()
        path.rmdir()
        feed._save()
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 2 and "cannot save the extender's state" in warnings[0], warnings
    assert "saved to" in warnings[1] and path.is_file()


def test_a_client_fault_is_one_warning_line_not_an_aiohttp_traceback() -> None:
    """A client hanging up mid-body wrote aiohttp's 18-line ERROR traceback into the extender's log each time."""
    from laggard.commands.advise_serve import _one_line_client_faults

    try:
        raise ConnectionResetError("Connection lost")
    except ConnectionResetError:
        import sys

        record = logging.LogRecord("aiohttp.server", logging.ERROR, "", 0, "Error handling request from %s",
                                   ("127.0.0.1",), sys.exc_info())
    assert _one_line_client_faults(record)
    assert (record.levelname, record.exc_info) == ("WARNING", None)
    assert logging.Formatter().format(record) == ("Error handling request from 127.0.0.1: ConnectionResetError: "
                                                  "Connection lost")
