"""Node status at task entry, kept per node from the event stream in event time (proactive avoidance, SPEC 6).

The paper (Yadwadkar and Choi, Table 2) describes a node by what runs on it when a task enters: the tasks
already running (AtEntry), recent peaks (RecentPeak: the last 50 s), peaks and sums over the task's run (Peak,
Sum). A scheduler deciding a placement knows only the past, so laggard keeps the causal versions of these,
from task starts and finishes alone (``streams.core.avoidance.features`` names them and says which sets each
source lacks):

* running tasks on the node, and those of the newcomer's type; tasks started in the last 5 minutes;
* the sums of the running tasks' CPU and memory requests (Google 2011 task_events carry requests);
* the maxima of the running count and of both sums over the last 5 and 15 minutes;
* the node's score: the mean z of its finished tasks that became known in the last hour, as the ranking's
  window mean (fed with the normaliser's samples, ``observe``).

A start of a task that is still running elsewhere (a reader saw a reschedule without the end) replaces the
earlier attempt, so an attempt whose end never comes does not load a node for ever. Tasks that were running
when a trace began are unknown: early in a trace, loads are undercounted.

>>> from streams.core.events import TaskStart, TaskFinish, Status
>>> tracker = NodeStatusTracker()
>>> tracker.update(TaskStart("j", "0", 0, "n1", 1_000_000, task_type="map", cpu_request=0.25, memory_request=0.5))
>>> tracker.update(TaskStart("j", "1", 0, "n1", 2_000_000, task_type="map", cpu_request=0.25, memory_request=0.5))
>>> tracker.update(TaskFinish("j", "0", 0, "n1", 3_000_000, 2_000_000, Status.SUCCEEDED))
>>> status = tracker.status("n1", 4_000_000, task_type="map")
>>> status.running, status.cpu_requested, status.running_peak_5m, status.cpu_peak_5m, status.started_5m
(1, 0.25, 2, 0.5, 2)
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from streams.core.events import Event, NormalizedTask, TaskFinish, TaskStart

STATE_FORMAT = "laggard-node-status/1"
US_PER_MIN = 60_000_000
RECENT_US = 5 * US_PER_MIN
PEAK_US = 15 * US_PER_MIN
SCORE_WINDOW_US = 60 * US_PER_MIN


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """What runs on one node at ``ts_us``, before a new task is added: the input of the trees."""

    node_id: str
    ts_us: int
    running: int = 0
    running_same_type: int = 0
    started_5m: int = 0
    cpu_requested: float = 0.0
    memory_requested: float = 0.0
    running_peak_5m: int = 0
    running_peak_15m: int = 0
    cpu_peak_5m: float = 0.0
    cpu_peak_15m: float = 0.0
    memory_peak_5m: float = 0.0
    memory_peak_15m: float = 0.0
    score: float = 0.0  # mean z of the node's recent finished tasks; 0 (a typical node) when none
    score_n: int = 0


@dataclass(slots=True)
class _Attempt:
    node_id: str
    attempt: int
    task_type: str
    cpu: float
    memory: float


@dataclass(slots=True)
class _Node:
    running: dict[tuple[str, str], _Attempt] = field(default_factory=dict)
    by_type: Counter[str] = field(default_factory=Counter)
    cpu: float = 0.0
    memory: float = 0.0
    starts: deque[int] = field(default_factory=deque)  # start times within the recent window
    history: deque[tuple[int, int, float, float]] = field(default_factory=deque)  # (ts, running, cpu, memory)
    scores: deque[tuple[int, float]] = field(default_factory=deque)  # (known at, z)
    score_sum: float = 0.0


class NodeStatusTracker:
    """Per-node running tasks, requests, recent peaks and score, updated by events in event-time order.

    ``update`` takes task starts and finishes (other events are ignored); ``observe`` takes the normaliser's
    z-values; ``status`` is the snapshot the adviser reads. Memory follows the running tasks and the last
    15 minutes of changes per node.
    """

    def __init__(self, recent_us: int = RECENT_US, peak_us: int = PEAK_US, score_window_us: int = SCORE_WINDOW_US):
        if not 0 < recent_us <= peak_us:
            raise ValueError("need 0 < recent_us <= peak_us")
        self.recent_us, self.peak_us, self.score_window_us = recent_us, peak_us, score_window_us
        self._nodes: dict[str, _Node] = {}
        self._where: dict[tuple[str, str], str] = {}  # (job, task) -> node of its running attempt

    def nodes(self) -> list[str]:
        """Every node seen so far, sorted."""
        return sorted(self._nodes)

    def snapshot(self) -> dict[str, Any]:
        """Everything the tracker knows, as a JSON-ready document (``restore`` reads it back): the adviser can
        stop and start again without forgetting what runs where."""
        nodes = {}
        for node_id, node in sorted(self._nodes.items()):
            nodes[node_id] = {
                "running": [[job, task, a.attempt, a.task_type, a.cpu, a.memory]
                            for (job, task), a in node.running.items()],
                "starts": list(node.starts),
                "history": [list(item) for item in node.history],
                "scores": [list(item) for item in node.scores],
                "sums": [node.cpu, node.memory, node.score_sum],  # as kept, so a restore adds up alike
            }  # fmt: skip
        windows = {"recent_us": self.recent_us, "peak_us": self.peak_us, "score_window_us": self.score_window_us}
        return {"format": STATE_FORMAT, **windows, "nodes": nodes}

    @classmethod
    def restore(cls, document: dict[str, Any]) -> NodeStatusTracker:
        """The tracker a ``snapshot`` was taken of; ``ValueError`` when the document is not one.

        >>> tracker = NodeStatusTracker()
        >>> tracker.update(TaskStart("j", "0", 0, "n1", 1_000_000, cpu_request=0.25))
        >>> again = NodeStatusTracker.restore(tracker.snapshot())
        >>> again.status("n1", 2_000_000) == tracker.status("n1", 2_000_000)
        True
        """
        if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
            raise ValueError(f"not a node-status snapshot (format {STATE_FORMAT!r} expected)")
        try:
            tracker = cls(int(document["recent_us"]), int(document["peak_us"]), int(document["score_window_us"]))
            for node_id, saved in document["nodes"].items():
                node = tracker._node(str(node_id))
                for job, task, attempt, kind, cpu, memory in saved["running"]:
                    node.running[(str(job), str(task))] = _Attempt(str(node_id), int(attempt), str(kind),
                                                                   float(cpu), float(memory))  # fmt: skip
                    node.by_type[str(kind)] += 1
                    tracker._where[(str(job), str(task))] = str(node_id)
                node.starts.extend(int(ts) for ts in saved["starts"])
                node.history.extend((int(t), int(n), float(c), float(m)) for t, n, c, m in saved["history"])
                node.scores.extend((int(t), float(z)) for t, z in saved["scores"])
                node.cpu, node.memory, node.score_sum = (float(value) for value in saved["sums"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a node-status snapshot: {exc!r}") from None
        return tracker

    def update(self, event: Event) -> None:
        if isinstance(event, TaskStart):
            self._start(event)
        elif isinstance(event, TaskFinish):
            self._finish(event.job_id, event.task_id, event.attempt, event.ts_us)

    def observe(self, sample: NormalizedTask, known_us: int) -> None:
        """A finished task's z on its node, known at ``known_us`` (when its job became final)."""
        node = self._node(sample.node_id)
        node.scores.append((known_us, sample.z))
        node.score_sum += sample.z

    def status(self, node_id: str, ts_us: int, task_type: str = "") -> NodeStatus:
        """The node's status at ``ts_us``; an unseen node is idle."""
        node = self._nodes.get(node_id)
        if node is None:
            return NodeStatus(node_id, ts_us)
        self._expire(node, ts_us)
        recent = self._peaks(node, ts_us - self.recent_us)
        peak = self._peaks(node, ts_us - self.peak_us)
        n = len(node.scores)
        return NodeStatus(
            node_id, ts_us, running=len(node.running), running_same_type=node.by_type[task_type],
            started_5m=len(node.starts), cpu_requested=_round(node.cpu), memory_requested=_round(node.memory),
            running_peak_5m=int(recent[0]), running_peak_15m=int(peak[0]), cpu_peak_5m=recent[1],
            cpu_peak_15m=peak[1], memory_peak_5m=recent[2], memory_peak_15m=peak[2],
            score=node.score_sum / n if n else 0.0, score_n=n,
        )  # fmt: skip

    def _node(self, node_id: str) -> _Node:
        node = self._nodes.get(node_id)
        if node is None:
            node = self._nodes[node_id] = _Node()
        return node

    def _start(self, event: TaskStart) -> None:
        key = (event.job_id, event.task_id)
        if key in self._where:  # an earlier attempt whose end never came: it is replaced
            previous = self._nodes[self._where[key]].running[key]
            self._finish(event.job_id, event.task_id, previous.attempt, event.ts_us)
        node = self._node(event.node_id)
        self._expire(node, event.ts_us)
        cpu, memory = event.cpu_request or 0.0, event.memory_request or 0.0
        node.running[key] = _Attempt(event.node_id, event.attempt, event.task_type, cpu, memory)
        node.by_type[event.task_type] += 1
        node.cpu += cpu
        node.memory += memory
        node.starts.append(event.ts_us)
        self._where[key] = event.node_id
        node.history.append((event.ts_us, len(node.running), _round(node.cpu), _round(node.memory)))

    def _finish(self, job_id: str, task_id: str, attempt: int, ts_us: int) -> None:
        key = (job_id, task_id)
        node_id = self._where.get(key)
        if node_id is None:
            return
        node = self._nodes[node_id]
        running = node.running[key]
        if running.attempt != attempt:
            return  # the end of an attempt that was already replaced
        del node.running[key], self._where[key]
        node.by_type[running.task_type] -= 1
        node.cpu -= running.cpu
        node.memory -= running.memory
        if not node.running:
            node.cpu = node.memory = 0.0  # no drift from float sums on an idle node
        self._expire(node, ts_us)
        node.history.append((ts_us, len(node.running), _round(node.cpu), _round(node.memory)))

    def _expire(self, node: _Node, ts_us: int) -> None:
        while node.starts and node.starts[0] <= ts_us - self.recent_us:
            node.starts.popleft()
        # keep the last change before the peak window: it is the value in force at the window's start
        while len(node.history) > 1 and node.history[1][0] <= ts_us - self.peak_us:
            node.history.popleft()
        while node.scores and node.scores[0][0] <= ts_us - self.score_window_us:
            node.score_sum -= node.scores.popleft()[1]
        if not node.scores:
            node.score_sum = 0.0

    @staticmethod
    def _peaks(node: _Node, since_us: int) -> tuple[float, float, float]:
        """Maxima of (running, cpu, memory) over [since_us, now]: the changes in it and the value at its start."""
        running = cpu = memory = 0.0
        for index, (ts, count, cpu_sum, memory_sum) in enumerate(node.history):
            nxt = node.history[index + 1][0] if index + 1 < len(node.history) else None
            if ts >= since_us or nxt is None or nxt > since_us:
                running, cpu, memory = max(running, count), max(cpu, cpu_sum), max(memory, memory_sum)
        return running, cpu, memory


def _round(value: float) -> float:
    """Sums of requests to 9 decimals, so adding and removing the same requests gives back the same number."""
    return round(value, 9)
