"""The ranking's cost per period and memory per node at cluster sizes no trace has: synthetic summaries and, for
a policy whose detector watches task events (``running``, the default), synthetic tasks.

The ranking sees one ``NodeSummary`` per normalising partition and period: per active node, the moments of the
z-values that finished in the period. So its work per period is a function of the active nodes, not of the task
rate. Here ``nodes`` nodes are all active every period (the worst case), each with ``tasks_per_node`` values per
period, ``slow`` of them clearly slower; the window (1 h, period 5 min: 12 buckets) is filled first, then
``periods`` periods are timed, each: apply the summaries of every partition, move the window, recompute every
node's statistics, P-Cores, the policy, the book. Memory is the growth of the resident set while the window
fills, per node. Under a task-watching policy each node also starts ``tasks_per_node`` tasks a period, in jobs of
20 spread over random nodes, lasting 2 minutes (log-normal, spread 0.5; twice that on the slow nodes); their start
and finish events go to the detector (``observe``, timed apart: the ranking agent receives every task event),
and the fill lasts as long as the detector remembers tasks (four windows), so the timed periods judge a full task
table.

The fastest timed period is ``seconds_per_period``, with their mean and slowest beside it (the running detector's
task table compacts every third of the fill, a slower period); memory at the end of the fill, and its peak
(``VmHWM``, the compactions' copies included). Run one size per process (memory is per process):
``python -m laggard.bench.scale NODES [PARTITIONS [POLICY]]``.
"""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from streams.core.detection.base import observes_tasks
from streams.core.events import NodeMoments, NodeSummary, Status, TaskFinish, TaskStart
from streams.core.moments import Moments
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig

PERIOD_US = 300_000_000
WINDOW_US = 3_600_000_000


def rss_mb(field: str = "VmRSS") -> float:
    """The process's resident set (``VmHWM``: its peak so far), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


JOB_TASKS, TASK_US = 20, 120_000_000  # a synthetic job's tasks, and their mean duration


def summaries(boundary: int, nodes: int, partitions: int, slow: int, tasks: int,
              rng: random.Random) -> list[NodeSummary]:
    """The summaries of one period: each node's values split over the partitions (jobs hash to all of them)."""
    per_partition: list[list[NodeMoments]] = [[] for _ in range(partitions)]
    bucket = boundary - PERIOD_US
    for node in range(nodes):
        shift = 1.5 if node < slow else 0.0
        values = [rng.gauss(shift, 1.0) for _ in range(tasks)]
        for p in range(partitions):
            part = values[p::partitions]
            if part:
                m = Moments.of(part)
                per_partition[p].append(NodeMoments(f"node-{node:07d}", bucket, m.n, m.mean, m.m2))
    return [NodeSummary(p, partitions, boundary, PERIOD_US, tuple(rows), ()) for p, rows in enumerate(per_partition)]


def tasks_of(boundary: int, nodes: int, slow: int, tasks: int, rng: random.Random
             ) -> list[tuple[str, str, str, int, int]]:
    """(job, task, node, start, duration) of every task started in the period ending at ``boundary``: ``tasks`` per
    node, in jobs of ``JOB_TASKS`` on random nodes, 2 minutes long (log-normal, spread 0.5), twice that on the first
    ``slow``. Plain tuples, which the garbage collector stops tracking at its first look: the events are made as
    they are observed, since a list of event objects living through the period would be walked by the collector as
    a stream's events never are (at 5 k nodes that was a third of the period's time)."""
    placed = [node for node in range(nodes) for _ in range(tasks)]
    rng.shuffle(placed)
    period = boundary // PERIOD_US
    return [(f"j{period}-{k // JOB_TASKS}", str(k % JOB_TASKS), f"node-{node:07d}",
             boundary - PERIOD_US + rng.randrange(PERIOD_US),
             round(rng.lognormvariate(0.0, 0.5) * TASK_US * (2.0 if node < slow else 1.0)))
            for k, node in enumerate(placed)]


def ranking_cost(nodes: int, partitions: int = 1, periods: int | None = None, tasks_per_node: int = 4,
                 seed: int = 1, policy: str = "pcores") -> dict[str, Any]:
    """Seconds per period and resident MB per node of the ranking of ``nodes`` active nodes under ``policy``, over
    ``periods`` timed periods (None: 3, or under a task-watching policy a third of the fill and one more, so one
    compaction of its task table falls in them: it compacts when a quarter of its rows can go)."""
    rng = random.Random(seed)
    ranker = NodeRanker(RankingConfig(window_size_us=WINDOW_US, period_us=PERIOD_US, policy=policy))
    watches = observes_tasks(ranker.detector)
    slow = max(1, nodes // 1000)
    fill = WINDOW_US // PERIOD_US
    if watches:  # as long as the detector keeps tasks (running: three windows and its quiet time)
        memory_us = getattr(ranker.detector, "memory_us", None)
        assert isinstance(memory_us, int), f"detector {ranker.detector.name} does not say how long it keeps tasks"
        fill = memory_us // PERIOD_US
    periods = (fill // 3 + 1 if watches else 3) if periods is None else periods
    gc.collect()
    before = rss_mb()
    seconds: list[float] = []
    summary_seconds: list[float] = []
    observe_seconds: list[float] = []
    deltas, observed = 0, 0
    observe = getattr(ranker.detector, "observe", None)
    for i in range(1, fill + periods + 1):
        boundary = i * PERIOD_US
        batch = summaries(boundary, nodes, partitions, slow, tasks_per_node, rng)  # made outside the timing
        placed = tasks_of(boundary, nodes, slow, tasks_per_node, rng) if watches else []
        started = time.perf_counter()
        for job, task, node, start, duration in placed:  # in the ranking agent, as they arrive (made here too)
            observe(TaskStart(job, task, 0, node, start))  # type: ignore[misc]
            observe(TaskFinish(job, task, 0, node, start + duration, duration, Status.SUCCEEDED))  # type: ignore[misc]
        observed_at = time.perf_counter()
        for summary in batch:
            ranker.merge(summary)
        merged = time.perf_counter()
        deltas += ranker.decide(boundary) is not None
        if i > fill:
            seconds.append(time.perf_counter() - observed_at)
            summary_seconds.append(merged - observed_at)
            observe_seconds.append(observed_at - started)
            observed = 2 * len(placed)
        del batch, placed
        if i == fill:
            gc.collect()
            grown = rss_mb() - before
    peak = rss_mb("VmHWM") - before
    listed = len(ranker.blacklist.node_ids)
    return {"nodes": nodes, "partitions": partitions, "policy": policy, "buckets_in_window": WINDOW_US // PERIOD_US,
            "fill_periods": fill, "timed_periods": periods, "tasks_per_node_period": tasks_per_node,
            "seconds_per_period": min(seconds), "mean_seconds_per_period": sum(seconds) / len(seconds),
            "max_seconds_per_period": max(seconds), "merge_seconds_per_period": min(summary_seconds),
            "task_events_per_period": observed, "observe_seconds_per_period": min(observe_seconds),
            "mb_per_1000_nodes": 1000 * grown / nodes, "window_mb": grown,
            "peak_mb_per_1000_nodes": 1000 * peak / nodes, "listed": listed, "slow": slow, "deltas": deltas}


def scale_stage(sizes: tuple[int, ...], running_sizes: tuple[int, ...] = (), partitions: int = 4) -> dict[str, Any]:
    """``ranking_cost`` of each size under P-Cores (``by_nodes``) and of each of ``running_sizes`` under the running
    policy (``running_by_nodes``), each in a process of its own (its memory is then its own)."""
    from laggard.bench.common import say

    def one(nodes: int, policy: str) -> dict[str, Any]:
        fed = "summaries and task events" if policy == "running" else "summaries"
        say(f"scale: ranking {nodes:,} synthetic nodes under {policy} from {partitions} partitions' {fed}")
        done = subprocess.run([sys.executable, "-m", "laggard.bench.scale", str(nodes), str(partitions), policy],
                              capture_output=True, check=True)  # fmt: skip
        result: dict[str, Any] = orjson.loads(done.stdout)
        return result

    return {"definition": " ".join((__doc__ or "").split("\n\n")[1].split()),
            "by_nodes": {str(nodes): one(nodes, "pcores") for nodes in sizes},
            "running_by_nodes": {str(nodes): one(nodes, "running") for nodes in running_sizes}}


def main(argv: list[str]) -> int:
    """``NODES [PARTITIONS [POLICY]]``: one JSON line on stdout; a wrong argument is one line on stderr, exit 2."""
    from streams.core.decision.registry import POLICIES

    usage = "usage: python -m laggard.bench.scale NODES [PARTITIONS (default 1) [POLICY (default pcores)]]"
    if not 1 <= len(argv) <= 3 or not all(a.isdecimal() and int(a) > 0 for a in argv[:2]):
        sys.stderr.write(f"{usage} (NODES and PARTITIONS: whole numbers above 0)\n")
        return 2
    chosen = argv[2] if len(argv) > 2 else "pcores"
    if chosen not in POLICIES:
        sys.stderr.write(f"unknown policy {chosen!r}; one of: {', '.join(POLICIES.names())}\n")
        return 2
    parts = int(argv[1]) if len(argv) > 1 else 1
    sys.stdout.buffer.write(orjson.dumps(ranking_cost(int(argv[0]), parts, policy=chosen)) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
