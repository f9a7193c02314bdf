"""The detector protocol: what every node-level detector gives the decision layer (SPEC 3, 6).

Detection, decision and action are separate (Cruise Control's detect / decide / act): a detector learns
from node samples and, once per ranking period, says for every node how clearly slow it looks and why
(``Evidence``); a policy (``streams.core.decision``) turns evidence into a blacklist under the guards
that do not depend on the detector (allow/deny-lists, the cap, dwell, release); adapters act on deltas.

A detector is a plain object in River's style: constructor arguments are hyperparameters, learned state
lives in attributes, ``snapshot()``/``restore()`` give it a life cycle the agents can checkpoint. It is
moved only by event time passed in, never by a clock.

>>> detector = NoopDetector()
>>> detector.learn(NormalizedTask("j", "t", 0, "n1", 0, 1, 2.0))
>>> view = WindowView(0, 3_600_000_000, {}, mean_count=0.0)
>>> detector.detect(view)
{}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from streams.core.events import Event, NormalizedTask, TaskCheckpoint, TaskFinish, TaskStart
from streams.core.windows import NodeStats


@dataclass(frozen=True, slots=True)
class WindowView:
    """One ranking window as the decision layer sees it: ``[start_us, end_us)`` and the exact window
    statistics of every node with a sample in it (SPEC 3), whatever the detector."""

    start_us: int
    end_us: int
    stats: Mapping[str, NodeStats]
    mean_count: float = 0.0  # mean samples per node in the window (ML-NA's normalised count)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one detector says of one node in one window.

    ``suspect``: the detector would list the node now. ``still_slow``: the node is still clearly slow
    even if it is not a suspect (for example pushed off P-Cores level 0 by a slower node): a listed node
    that is still slow is not released. ``score`` orders suspects when the cap leaves fewer places than
    suspects (higher = more clearly slow). ``level`` is the node's rank level when the detector has one
    (P-Cores), else None. ``reason`` says in words why the node is (or is not) a suspect; it travels
    with the delta.
    """

    node_id: str
    suspect: bool
    score: float
    reason: str
    still_slow: bool = False
    level: int | None = None


class NodeDetector(Protocol):
    """A node-level detector: learn from samples, score every node once per period, explain."""

    name: str

    def learn(self, sample: NormalizedTask) -> None:
        """One node sample (a finished task's z-value on its node), in any order within a period."""
        ...

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        """Evidence for the nodes this detector has an opinion on (nodes left out are not suspects)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """Learned state as plain JSON-able data."""
        ...

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from ``snapshot()``; an unreadable snapshot raises ValueError (cold start)."""
        ...


@runtime_checkable
class TaskObserver(Protocol):
    """Optional beside ``NodeDetector``: a detector that also watches task events as they happen (starts,
    checkpoints, finishes), so a fault shows before its slow tasks finish. ``observe`` receives every valid
    task event; the detector must judge a boundary ``B`` only by events before ``B`` (they may arrive
    interleaved with later ones). ``observe_row`` takes the same event as its row (``streams.core.task_rows``: what
    a Kafka worker's normalisers send the ranking) and must do exactly what ``observe`` does with it."""

    def observe(self, event: Event) -> None: ...

    def observe_row(self, ts: int, kind: int, job: str, task: str, node: str, value: int, ppm: int) -> None: ...


def observes_tasks(detector: object) -> bool:
    """Whether ``detector`` watches task events (a ``TaskObserver``): the one test every caller uses.

    >>> observes_tasks(NoopDetector())
    False
    """
    # The attribute test is what isinstance(detector, TaskObserver) checks, at a hundredth of its cost: the
    # runtime protocol check took 18 % of `laggard run` on Google 2011, once per event.
    return getattr(detector, "observe", None) is not None


def judges_recent_nodes(detector: object) -> bool:
    """Whether the nodes ``detector`` judges are nodes seen recently, to be counted for the cap beside the window's
    (``policy.nodes_seen``): the running detector judges nodes with a task started over its longest scale (three
    hours). A detector whose evidence reaches further back (ML-NA's nodes of the last 30 days) or that was never
    measured so (shift) leaves it off: its cap counts the window's nodes alone.

    >>> judges_recent_nodes(NoopDetector())
    False
    """
    return bool(getattr(detector, "judges_recent_nodes", False))


def observe_task(detector: object, event: Event) -> None:
    """Hand a task event to ``detector`` if it watches task events (``TaskObserver``); what ``RankStage.observe``
    does, in every shell (the in-process runner and both engines' rank side), for every valid
    ``TaskStart``/``TaskCheckpoint``/``TaskFinish``, before the ranking of any boundary after the event's time.

    >>> observe_task(NoopDetector(), TaskStart("j", "t", 0, "n1", 5))  # not a TaskObserver: nothing happens
    """
    observe = getattr(detector, "observe", None)  # observes_tasks, with the method kept
    if observe is not None and isinstance(event, TaskStart | TaskCheckpoint | TaskFinish):
        observe(event)


class NoopDetector:
    """Suspects nothing: the do-nothing default that shows a policy's guards alone (deny-list only)."""

    name = "noop"
    learns_from_samples = False

    def learn(self, sample: NormalizedTask) -> None:
        return None

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        return {}

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        return None
