"""The adviser over HTTP in the Kubernetes scheduler-extender protocol (SPEC 6; ``k8s.io/kube-scheduler/extender/v1``).

kube-scheduler POSTs an ``ExtenderArgs`` JSON body (``Pod``, and either ``Nodes``, a NodeList, or
``NodeNames`` when the extender is ``nodeCacheCapable``) to ``<urlPrefix>/<verb>``:

* ``filter`` answers an ``ExtenderFilterResult``: the nodes the adviser allows (as a NodeList, or as
  ``NodeNames`` when names were sent), ``FailedNodes`` (node -> the reason: the tree path in words, or the
  blacklist), ``FailedAndUnresolvableNodes`` (empty: a node avoided for load may suit the pod later, so
  preemption may still try it) and ``Error`` ("" when all went well).
* ``prioritize`` answers a ``HostPriorityList``: ``[{"Host": node, "Score": 0..10}]``.

The Go types carry no JSON tags, so the field names are the Go names; Go's decoder matches keys ignoring
case, and so does this one. The pod's task type is its ``laggard.io/task-type`` annotation or label (else
the empty type, whose tree is ``all``); its CPU and memory requests are not read (the trees learned
requests in the trace's units, not in cores and bytes). A body that is not JSON, or not an ExtenderArgs,
gets a 400 with the reason, and the server goes on.

Node status comes from ``status_of`` (a callable, (node, task type) -> NodeStatus) and the blacklist from ``listed`` (a
callable returning the current set): both pluggable, so a live deployment can feed them from the worker's
topics while ``laggard advise serve`` feeds them from a trace and a blacklist file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from aiohttp import web

from streams.core.avoidance.adviser import Advice, Adviser
from streams.core.avoidance.features import task_type_of
from streams.core.avoidance.status import NodeStatus

TASK_TYPE_KEY = "laggard.io/task-type"
StatusOf = Callable[[str, str], NodeStatus]  # (node, task type) -> status


class BadArgs(ValueError):
    """The body is not an ExtenderArgs; ``str(error)`` is the reason sent back with the 400."""


def _get(mapping: dict[str, Any], name: str) -> Any:
    """A field by its Go name, matched ignoring case as Go's JSON decoder does."""
    if name in mapping:
        return mapping[name]
    lowered = name.lower()
    return next((value for key, value in mapping.items() if key.lower() == lowered), None)


def parse_args(body: bytes) -> tuple[str, list[str], list[dict[str, Any]] | None]:
    """(task type, candidate node names, the NodeList items when nodes came as objects, else None)."""
    try:
        args = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadArgs(f"body is not JSON: {exc}") from None
    if not isinstance(args, dict):
        raise BadArgs("ExtenderArgs must be a JSON object")
    pod = _get(args, "Pod") or {}
    if not isinstance(pod, dict):
        raise BadArgs("Pod must be an object")
    metadata = pod.get("metadata") or {}
    marks = {**(metadata.get("labels") or {}), **(metadata.get("annotations") or {})}
    task_type = task_type_of(str(marks.get(TASK_TYPE_KEY, "")))
    names, items = _get(args, "NodeNames"), None
    if names is None:
        nodes = _get(args, "Nodes")
        if not isinstance(nodes, dict) or not isinstance(nodes.get("items"), list):
            raise BadArgs("ExtenderArgs needs Nodes (a NodeList with items) or NodeNames")
        items = nodes["items"]
        names = [_node_name(item) for item in items]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise BadArgs("NodeNames must be a list of node names")
    return task_type, names, items


def _node_name(item: Any) -> str:
    name = item.get("metadata", {}).get("name") if isinstance(item, dict) else None
    if not isinstance(name, str) or not name:
        raise BadArgs("every node in Nodes.items needs metadata.name")
    return name


class Extender:
    """filter and prioritize over an adviser; ``app()`` is the aiohttp application."""

    def __init__(self, adviser: Adviser, status_of: StatusOf, listed: Callable[[], Collection[str]]) -> None:
        self.adviser, self.status_of, self.listed = adviser, status_of, listed

    def _advice(self, task_type: str, names: list[str]) -> list[Advice]:
        self.adviser.listed = frozenset(self.listed())
        return [self.adviser.advise(name, task_type, self.status_of(name, task_type)) for name in names]

    def filter(self, body: bytes) -> dict[str, Any]:
        task_type, names, items = parse_args(body)
        advice = self._advice(task_type, names)
        kept = [a.node_id for a in advice if a.allowed]
        result: dict[str, Any] = {
            "FailedNodes": {a.node_id: a.reason for a in advice if not a.allowed},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        if items is None:
            result["Nodes"], result["NodeNames"] = None, kept
        else:
            allowed = set(kept)
            result["Nodes"] = {"items": [item for item in items if _node_name(item) in allowed]}
            result["NodeNames"] = None
        return result

    def prioritize(self, body: bytes) -> list[dict[str, Any]]:
        task_type, names, _ = parse_args(body)
        return [{"Host": a.node_id, "Score": self.adviser.priority(a)} for a in self._advice(task_type, names)]

    def app(self) -> web.Application:
        async def filter_(request: web.Request) -> web.Response:
            return self._answer(self.filter, await request.read())

        async def prioritize(request: web.Request) -> web.Response:
            return self._answer(self.prioritize, await request.read())

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post("/filter", filter_)
        app.router.add_post("/prioritize", prioritize)
        app.router.add_get("/healthz", healthz)
        return app

    @staticmethod
    def _answer(verb: Callable[[bytes], Any], body: bytes) -> web.Response:
        try:
            return web.json_response(verb(body))
        except BadArgs as exc:
            return web.json_response({"Error": str(exc)}, status=400)


class BlacklistFile:
    """The listed nodes from a file adapter's blacklist file (one node a line), re-read when it changes; a
    missing file is an empty list."""

    def __init__(self, path: Path | None) -> None:
        self.path, self._stamp, self._nodes = path, None, frozenset[str]()

    def __call__(self) -> frozenset[str]:
        if self.path is None:
            return self._nodes
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return frozenset()
        if stamp != self._stamp:
            lines = self.path.read_text().splitlines()
            self._nodes = frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))
            self._stamp = stamp
        return self._nodes
