"""The scheduler-extender endpoint over real HTTP on 127.0.0.1: Kubernetes' ExtenderArgs in, ExtenderFilterResult
and HostPriorityList out; bad bodies get a 400 with the reason and the server keeps answering."""

from __future__ import annotations

import asyncio
import json
import socket
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    blacklist = tmp_path / "blacklist.txt"
    blacklist.write_text("node-listed\n")
    extender = Extender(Adviser(_trees(), 1.0), lambda node, kind: NodeStatus(node, 0, running=BUSY.get(node, 2)),
                        BlacklistFile(blacklist))  # fmt: skip
    port = _free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(extender.app())
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    import threading

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)


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


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"Pod": {}}', b'{"NodeNames": [3]}', b"\xff\xfe"])
def test_a_bad_body_gets_a_400_with_a_reason_and_the_server_goes_on(server: str, body: bytes) -> None:
    status, result = _post(f"{server}/filter", body)
    assert status == 400 and result["Error"]
    assert _post(f"{server}/filter", json.dumps(ARGS).encode())[0] == 200
