"""The adviser over HTTP in the Kubernetes scheduler-extender protocol (SPEC 6; ``k8s.io/kube-scheduler/extender/v1``).

kube-scheduler POSTs an ``ExtenderArgs`` JSON body (``Pod``, and either ``Nodes``, a NodeList, or
``NodeNames`` when the extender is ``nodeCacheCapable``) to ``<urlPrefix>/<verb>``:

* ``filter`` answers an ``ExtenderFilterResult``: the nodes the adviser allows (as a NodeList, or as
  ``NodeNames`` when names were sent; with a refusal budget, a call is one placement, and while the budget
  is spent the nodes the trees would avoid pass), ``FailedNodes`` (node -> the reason: the tree path in
  words, or the blacklist), ``FailedAndUnresolvableNodes`` (empty: a node avoided for load may suit the pod later, so
  preemption may still try it) and ``Error`` ("" when all went well).
* ``prioritize`` answers a ``HostPriorityList``: ``[{"Host": node, "Score": 0..10}]``.

The Go types carry no JSON tags, so the field names are the Go names; Go's decoder matches keys ignoring
case, and so does this one. The pod's task type is its ``laggard.io/task-type`` annotation or label (a string, as
Kubernetes has them: a number or any other JSON value is a 400), else
``all``, the tree of every type pooled (``laggard advise serve``); a type with no tree is allowed everywhere but
on the blacklist, with a warning the first time it comes; its CPU and memory requests are not read (the trees learned
requests in the trace's units, not in cores and bytes). A body that is not JSON, or not an ExtenderArgs,
gets a 400 with the reason, and the server goes on.

Node status comes from ``status_of`` (a callable, (node, task type) -> NodeStatus) and the blacklist from ``listed`` (a
callable returning the current set): both pluggable. ``laggard advise serve`` feeds them from a trace, or live
from Kafka (``adapters.extender_feed.StatusFeed``: a thin kafka-python consumer of ``task-events`` for what starts and
ends where and of ``node-samples`` for the nodes' z-values, into the core's ``NodeStatusTracker``), and a blacklist
file. ``LiveStatus`` keeps the tracker and the feed's offsets across restarts.

Prometheus metrics (prometheus_client's default registry, served by ``streams.health.serve`` on the metrics
port as the other adapters do): ``laggard_extender_requests{verb}``, ``laggard_extender_nodes{verb,verdict}``
(nodes allowed, avoided by the trees, let through because the refusal budget was spent, or filtered as
listed: ``allowed|avoided|spent|listed``), ``laggard_extender_errors{kind}`` (``bad-request``:
a 400; ``internal``: a 500), and ``laggard_events_in{topic,reader="adapter-extender"}`` for the feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import Counter

from adapters.base import write_atomically
from streams.core.avoidance.adviser import Advice, Adviser
from streams.core.avoidance.budget import RefusalBudget
from streams.core.avoidance.calibration import CalibratedBudget, restore_budget
from streams.core.avoidance.features import task_type_of
from streams.core.avoidance.status import NodeStatus, NodeStatusTracker
from streams.core.events import NormalizedTask, TaskFinish, TaskStart

log = logging.getLogger("laggard.adapters")
REQUESTS = Counter("laggard_extender_requests", "Scheduler-extender requests answered, per verb", ["verb"])
NODES = Counter("laggard_extender_nodes", "Candidate nodes judged, per verb and verdict (allowed, avoided, listed)",
                ["verb", "verdict"])
_VERDICT_LABEL = {"allow": "allowed", "avoid": "avoided"}
ERRORS = Counter("laggard_extender_errors", "Requests that failed: bad-request (400), too-large (413), timeout "
                 "(408: the body did not arrive) or internal (500); the status feed's undecodable records and "
                 "failed state saves (state-unsaved)", ["kind"])

TASK_TYPE_KEY = "laggard.io/task-type"
MAX_BODY_BYTES = 256 << 20  # an ExtenderArgs of 5,000 Node objects (Kubernetes' largest supported cluster)
# The scheduler gives an extender 30 s by default (ExtenderConfig.httpTimeout): a body of which no byte came for
# that long (a client that declared more bytes than it sends) is answered, not waited for with its connection held.
BODY_TIMEOUT_S = 30.0
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
    if not isinstance(metadata, dict):
        raise BadArgs("Pod.metadata must be an object")
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    if not isinstance(labels, dict) or not isinstance(annotations, dict):
        raise BadArgs("Pod.metadata.labels and .annotations must be objects (string to string)")
    marks = {**labels, **annotations}
    named = marks.get(TASK_TYPE_KEY)
    if named is not None and not isinstance(named, str):  # 3 was judged as a type "3", true as "True"
        raise BadArgs(f"the pod's {TASK_TYPE_KEY} must be a string naming a task type (Kubernetes labels and "
                      f"annotations are strings), not the JSON {_JSON_KINDS.get(type(named), 'value')} "
                      f"{json.dumps(named)[:40]}")
    task_type = task_type_of(named or "")
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


_JSON_KINDS = {int: "number", float: "number", bool: "boolean", dict: "object", list: "array"}


def _node_name(item: Any) -> str:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise BadArgs("every node in Nodes.items needs metadata.name")
    return name


class Extender:
    """filter and prioritize over an adviser; ``app()`` is the aiohttp application.

    With the adviser's refusal budget, each filter call is one placement decision (``Adviser.settle``, at the
    event time of the nodes' status): while the budget is spent, a node the trees would avoid passes (counted
    under the verdict ``spent``, its reason logged); prioritize never spends it and still ranks.
    ``lock`` guards the budget against a concurrent state save (``LiveStatus.lock``)."""

    def __init__(self, adviser: Adviser, status_of: StatusOf, listed: Callable[[], Collection[str]],
                 lock: Any = None) -> None:  # fmt: skip
        self.adviser, self.status_of, self.listed = adviser, status_of, listed
        self.lock = lock if lock is not None else contextlib.nullcontext()
        self._untreed: set[str] = set()  # task types asked for with no tree (each warned about once; 100 at most)

    def _advice(self, verb: str, task_type: str, names: list[str]) -> list[Advice]:
        self.adviser.listed = frozenset(self.listed())
        if task_type not in self.adviser.trees.trees and task_type not in self._untreed and len(self._untreed) < 100:
            self._untreed.add(task_type)  # its pods pass every node but the listed ones: an operator must know
            log.warning("no tree for task type %r (trees: %s): its pods are allowed on every node not listed; "
                        "name a pod's type with the %s annotation or label", task_type,
                        ", ".join(sorted(self.adviser.trees.trees)) or "none", TASK_TYPE_KEY)
        statuses = [self.status_of(name, task_type) for name in names]
        advice = [self.adviser.advise(name, task_type, status) for name, status in zip(names, statuses, strict=True)]
        if verb == "filter" and statuses:
            with self.lock:
                advice = self.adviser.settle(advice, max(status.ts_us for status in statuses))
        REQUESTS.labels(verb).inc()
        for a in advice:
            if a.budget_spent:  # a passing node has no place for a reason in ExtenderFilterResult: the log has it
                log.info("%s passes for %s: %s", a.node_id, task_type or "any type", a.reason)
            NODES.labels(verb, "listed" if a.listed else "spent" if a.budget_spent else _VERDICT_LABEL[a.verdict]).inc()
        return advice

    def filter(self, body: bytes) -> dict[str, Any]:
        task_type, names, items = parse_args(body)
        advice = self._advice("filter", task_type, names)
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
        advice = self._advice("prioritize", task_type, names)
        return [{"Host": a.node_id, "Score": self.adviser.priority(a)} for a in advice]

    def app(self, body_timeout_s: float = BODY_TIMEOUT_S) -> web.Application:
        async def filter_(request: web.Request) -> web.Response:
            body = await _body(request, body_timeout_s)
            return body if isinstance(body, web.Response) else self._answer(self.filter, body)

        async def prioritize(request: web.Request) -> web.Response:
            body = await _body(request, body_timeout_s)
            return body if isinstance(body, web.Response) else self._answer(self.prioritize, body)

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        # Without nodeCacheCapable the scheduler sends whole Node objects (their images, conditions, ...): 1 MiB,
        # aiohttp's default, is ~100 nodes, and a larger cluster's every pod failed with a 413.
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/filter", filter_)
        app.router.add_post("/prioritize", prioritize)
        app.router.add_get("/healthz", healthz)
        return app

    @staticmethod
    def _answer(verb: Callable[[bytes], Any], body: bytes) -> web.Response:
        try:
            return web.json_response(verb(body))
        except BadArgs as exc:
            ERRORS.labels("bad-request").inc()
            return web.json_response({"Error": str(exc)}, status=400)
        except Exception as exc:  # a bug must not take the scheduler's extender down: answer 500 and go on
            ERRORS.labels("internal").inc()
            log.exception("scheduler-extender request failed")
            return web.json_response({"Error": f"internal error: {type(exc).__name__}: {exc}"}, status=500)


async def _body(request: web.Request, timeout_s: float) -> bytes | web.Response:
    """The request's body, or the JSON error answering it: 413 when it declares or sends more than
    ``MAX_BODY_BYTES`` (refused before reading what it declared), 408 when no byte of it came for ``timeout_s``
    (a body that keeps arriving, however slowly, is read)."""
    declared = request.content_length
    if declared is not None and declared > MAX_BODY_BYTES:
        return _refused(413, "too-large", f"a body of {declared:,} bytes is over the {MAX_BODY_BYTES >> 20} MiB "
                        "an extender request may have")
    chunks, got = [], 0
    while True:
        try:
            chunk = await asyncio.wait_for(request.content.read(1 << 20), timeout_s)
        except TimeoutError:
            of = f" of {declared:,} declared" if declared is not None else ""
            return _refused(408, "timeout", f"no byte of the body came for {timeout_s:g} s ({got:,}{of} received)")
        if not chunk:
            return b"".join(chunks)
        got += len(chunk)
        if got > MAX_BODY_BYTES:  # a chunked body that ran past the limit
            return _refused(413, "too-large", f"the body is over the {MAX_BODY_BYTES >> 20} MiB an extender "
                            "request may have")
        chunks.append(chunk)


def _refused(status: int, kind: str, why: str) -> web.Response:
    ERRORS.labels(kind).inc()
    log.warning("extender request refused (%d): %s", status, why)
    return web.json_response({"Error": why}, status=status)


class BlacklistFile:
    """The listed nodes from a file adapter's blacklist file (one node a line), re-read when it changes; a
    missing file is an empty list."""

    def __init__(self, path: Path | None) -> None:
        self.path, self._nodes = path, frozenset[str]()
        self._stamp: int | None = None

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


STATE_FORMAT = "laggard-extender-state/1"


class LiveStatus:
    """The node-status tracker behind a lock, the event time it has reached, and the feed's next offsets
    (``"topic:partition" -> offset``): what ``status_of`` reads while ``StatusFeed`` writes.

    Records of ``task-events`` come per partition (by job), so across partitions they are only roughly in
    event time; the tracker tolerates that (a peak may be a few seconds early or late)."""

    def __init__(self, tracker: NodeStatusTracker, now_us: int = 0, offsets: dict[str, int] | None = None,
                 budget: RefusalBudget | CalibratedBudget | None = None) -> None:  # fmt: skip
        self.tracker, self.now_us, self.offsets = tracker, now_us, dict(offsets or {})
        self.budget = budget  # the adviser's refusal budget, saved and restored with the tracker
        self.lock = threading.Lock()
        self.changed = False

    def apply(self, event: Any, position: str | None = None, next_offset: int = 0) -> None:
        """One decoded record: task starts and ends load nodes, node samples move their score."""
        with self.lock:
            if isinstance(event, TaskStart | TaskFinish):
                self.tracker.update(event)
                self.now_us = max(self.now_us, event.ts_us)
            elif isinstance(event, NormalizedTask):
                self.tracker.observe(event, max(self.now_us, event.ts_us))
            if position is not None:
                self.offsets[position] = next_offset
            self.changed = True

    def status(self, node_id: str, task_type: str) -> NodeStatus:
        with self.lock:
            return self.tracker.status(node_id, self.now_us, task_type)

    def save(self, path: Path) -> None:
        """Replace the state file atomically with the tracker, the event time and the offsets."""
        with self.lock:
            document = {"format": STATE_FORMAT, "now_us": self.now_us, "offsets": dict(sorted(self.offsets.items())),
                        "tracker": self.tracker.snapshot(),
                        "budget": None if self.budget is None else self.budget.snapshot()}  # fmt: skip
            self.changed = False
        write_atomically(path, orjson.dumps(document).decode() + "\n")

    @classmethod
    def load(cls, path: Path) -> LiveStatus | None:
        """The state saved at ``path``; None (a cold start, with a warning) when it is missing or unusable."""
        if not path.exists():
            return None
        try:
            document = orjson.loads(path.read_bytes())
            if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
                raise ValueError(f"format {document.get('format') if isinstance(document, dict) else None!r}, "
                                 f"expected {STATE_FORMAT!r}")  # fmt: skip
            offsets = {str(key): int(value) for key, value in document["offsets"].items()}
            saved = document.get("budget")
            budget = None if saved is None else restore_budget(saved)
            return cls(NodeStatusTracker.restore(document["tracker"]), int(document["now_us"]), offsets, budget)
        except (ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
            log.warning("ignoring state file %s (%s): node status starts empty", path, exc)
            return None
