"""The ranking's cost per period and memory per node at cluster sizes no trace has: synthetic summaries.

The ranking sees one ``NodeSummary`` per normalising partition and period: per active node, the moments of the
z-values that finished in the period. So its work per period is a function of the active nodes, not of the task
rate. Here ``nodes`` nodes are all active every period (the worst case), each with ``tasks_per_node`` values per
period, ``slow`` of them clearly slower; the window (1 h, period 5 min: 12 buckets) is filled first, then
``periods`` periods are timed, each: apply the summaries of every partition, move the window, recompute every
node's statistics, P-Cores, the policy, the book. Memory is the growth of the resident set while the window
fills, per node.

Run one size per process (memory is per process): ``python -m laggard.bench.scale NODES [PARTITIONS]``.
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

from streams.core.events import NodeMoments, NodeSummary
from streams.core.moments import Moments
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig

PERIOD_US = 300_000_000
WINDOW_US = 3_600_000_000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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


def ranking_cost(nodes: int, partitions: int = 1, periods: int = 3, tasks_per_node: int = 4,
                 seed: int = 1) -> dict[str, Any]:
    """Seconds per period and resident MB per node of the ranking of ``nodes`` active nodes."""
    rng = random.Random(seed)
    ranker = NodeRanker(RankingConfig(window_size_us=WINDOW_US, period_us=PERIOD_US))
    slow = max(1, nodes // 1000)
    fill = WINDOW_US // PERIOD_US
    gc.collect()
    before = rss_mb()
    seconds: list[float] = []
    summary_seconds: list[float] = []
    deltas = 0
    for i in range(1, fill + periods + 1):
        boundary = i * PERIOD_US
        batch = summaries(boundary, nodes, partitions, slow, tasks_per_node, rng)  # made outside the timing
        started = time.perf_counter()
        for summary in batch:
            ranker.merge(summary)
        merged = time.perf_counter()
        deltas += ranker.decide(boundary) is not None
        if i > fill:
            seconds.append(time.perf_counter() - started)
            summary_seconds.append(merged - started)
        if i == fill:
            gc.collect()
            grown = rss_mb() - before
    listed = len(ranker.blacklist.node_ids)
    return {"nodes": nodes, "partitions": partitions, "buckets_in_window": fill,
            "tasks_per_node_period": tasks_per_node, "seconds_per_period": min(seconds),
            "merge_seconds_per_period": min(summary_seconds), "mb_per_1000_nodes": 1000 * grown / nodes,
            "window_mb": grown, "listed": listed, "slow": slow, "deltas": deltas}


def scale_stage(sizes: tuple[int, ...], partitions: int = 4) -> dict[str, Any]:
    """``ranking_cost`` of each size, each in a process of its own (its memory is then its own)."""
    from laggard.bench.common import say

    results = {}
    for nodes in sizes:
        say(f"scale: ranking {nodes:,} synthetic nodes from {partitions} partitions' summaries")
        done = subprocess.run([sys.executable, "-m", "laggard.bench.scale", str(nodes), str(partitions)],
                              capture_output=True, check=True)  # fmt: skip
        results[str(nodes)] = orjson.loads(done.stdout)
    return {"definition": " ".join((__doc__ or "").split("\n\n")[1].split()), "by_nodes": results}


if __name__ == "__main__":
    count = int(sys.argv[1])
    parts = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sys.stdout.buffer.write(orjson.dumps(ranking_cost(count, parts)) + b"\n")
