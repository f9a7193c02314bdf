"""The features of a placement, by the paper's feature sets, and the task type that picks a tree.

The paper (Table 2) groups node status into four sets. laggard keeps the causal part of each, from task
events alone (``NodeStatusTracker``):

====================  =====================================================================================
AtEntry (E)           running tasks, running tasks of the same type, tasks started in the last 5 minutes,
                      the node's score (window mean z of its recent finished tasks)
Sum (S)               sums of the running tasks' CPU and memory requests at entry, and with the newcomer's
                      added (committed); the paper sums over the task's own run, which a scheduler cannot
                      know at placement time
RecentPeak (R)        maxima of the running count and of both sums over the last 5 minutes (paper: 50 s)
Peak (P)              the same over the last 15 minutes; the paper's Peak is over the task's own run (the
                      future at placement), so a longer look back stands in for it
Task (T)              the newcomer's own CPU and memory requests (the paper's conclusion 2: task and node
                      together)
====================  =====================================================================================

What each source lacks (``SOURCE_GAPS``): no trace here carries measured usage (the paper's NMON features:
CPU usage, physical and virtual memory, local and remote read and write rates), so every usage feature of
Table 2 is absent. Google 2011 task_events carry requests (S, the request part of R and P, T); the synthetic
cluster carries them only with its load model (``load=...``); Alibaba 2017 and CSV traces carry none, and
their S, T and the request columns of R and P are zero.

>>> from streams.core.avoidance.status import NodeStatus
>>> x = features(NodeStatus("n1", 0, running=3, cpu_requested=0.5), cpu_request=0.1)
>>> x["running"], x["cpu_requested"], x["cpu_request"], len(x) == len(FEATURES)
(3.0, 0.5, 0.1, True)
>>> describe("cpu_requested")
'CPU requested'
>>> task_type_of("", scheduling_class=2)
'class-2'
"""

from __future__ import annotations

from streams.core.avoidance.status import NodeStatus

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "E": ("running", "running_same_type", "started_5m", "score"),
    "S": ("cpu_requested", "memory_requested", "cpu_committed", "memory_committed"),
    "R": ("running_peak_5m", "cpu_peak_5m", "memory_peak_5m"),
    "P": ("running_peak_15m", "cpu_peak_15m", "memory_peak_15m"),
    "T": ("cpu_request", "memory_request"),
}
SET_NAMES = {"E": "AtEntry", "S": "Sum", "R": "RecentPeak", "P": "Peak", "T": "Task"}
FEATURES: tuple[str, ...] = tuple(name for names in FEATURE_SETS.values() for name in names)

# Words for a tree path ("running tasks 14 > 11").
LABELS = {
    "running": "running tasks",
    "running_same_type": "running tasks of its type",
    "started_5m": "tasks started in 5 min",
    "score": "node score (mean z)",
    "cpu_requested": "CPU requested",
    "memory_requested": "memory requested",
    "cpu_committed": "CPU committed with it",
    "memory_committed": "memory committed with it",
    "running_peak_5m": "running tasks, 5-min peak",
    "cpu_peak_5m": "CPU requested, 5-min peak",
    "memory_peak_5m": "memory requested, 5-min peak",
    "running_peak_15m": "running tasks, 15-min peak",
    "cpu_peak_15m": "CPU requested, 15-min peak",
    "memory_peak_15m": "memory requested, 15-min peak",
    "cpu_request": "its CPU request",
    "memory_request": "its memory request",
}

SOURCE_GAPS = {
    "google2011-events": "no usage (CPU, memory, I/O measured): task_usage is not in the shared trace",
    "synthetic": "no usage; requests (S, T, request peaks) only with load=...",
    "alibaba-batch": "no usage in the batch table, no requests: S, T and request peaks are zero",
    "csv": "no usage, no requests: S, T and request peaks are zero",
}


def features(status: NodeStatus, cpu_request: float | None = None, memory_request: float | None = None) -> dict[
    str, float
]:
    """The feature dict of a placement: the node's ``status`` at entry and the task's own requests."""
    values = {name: float(getattr(status, name)) for name in FEATURES if hasattr(status, name)}
    values["cpu_request"] = float(cpu_request or 0.0)
    values["memory_request"] = float(memory_request or 0.0)
    # what the node would have committed with the newcomer: a tree splits on one feature at a time, and the
    # sum is what a capacity limit acts on
    values["cpu_committed"] = values["cpu_requested"] + values["cpu_request"]
    values["memory_committed"] = values["memory_requested"] + values["memory_request"]
    return {name: values[name] for name in FEATURES}


def describe(name: str) -> str:
    """A feature's name in words."""
    return LABELS.get(name, name.replace("_", " "))


def task_type_of(task_type: str, scheduling_class: int | None = None, priority: int | None = None) -> str:
    """The tree a task belongs to: its own type when the source names one (map/reduce, synthetic job types),
    else Google's scheduling class, else its priority band, else one tree for all (``"all"``)."""
    if task_type:
        return task_type
    if scheduling_class is not None:
        return f"class-{scheduling_class}"
    if priority is not None:
        return "free" if priority <= 1 else "production" if priority >= 9 else "middle"
    return "all"
