"""P-Cores interval ranking (DSB Algorithm 3), in O(n log n).

There is an edge m1 → m2 when ``m1.ci_high <= m2.ci_low``: m1 is clearly faster than m2. Level 0
holds the nodes with no outgoing edge (nothing is clearly slower); remove them and the edges into
them, the next nodes with no outgoing edge are level 1, and so on.

Peeling sinks layer by layer gives every node the length of its longest path to a sink:
``level(v) = 1 + max(level(u) for u with v → u)``, 0 when v has no outgoing edge. The out-neighbours
of v are exactly the nodes whose ``ci_low`` is at least ``v.ci_high``, so after sorting by the two
bounds a sweep computes every level without building the (up to n²) edges; the Google 2011 trace
has about 12,000 nodes.

Two nodes whose intervals are the same single point (std 0) would have edges both ways, a cycle the
paper's DAG cannot hold; laggard treats them as overlapping (no edge between them).
"""

from __future__ import annotations

from collections.abc import Mapping

Interval = tuple[float, float]


def pcores_levels(intervals: Mapping[str, Interval]) -> dict[str, int]:
    """The P-Cores level of each node from its ``(ci_low, ci_high)``; 0 is the slowest level.

    >>> levels = pcores_levels({"fast": (-1.0, -0.5), "mid": (-0.4, 0.1), "slow": (0.5, 0.9),
    ...                         "wide": (-1.0, 1.0)})
    >>> dict(sorted(levels.items()))
    {'fast': 2, 'mid': 1, 'slow': 0, 'wide': 0}
    """
    entries = []
    for node, (low, high) in intervals.items():
        if not low <= high:
            raise ValueError(f"interval of {node} is not ordered: ({low}, {high})")
        entries.append((high, low, node))
    # Parallel lists indexed by position in descending ci_high order: plain list indexing in the
    # sweep below, no per-node dict look-ups or key functions (this runs every ranking period).
    entries.sort(reverse=True)
    highs = [e[0] for e in entries]
    lows = [e[1] for e in entries]
    by_low = sorted(range(len(entries)), key=lows.__getitem__, reverse=True)
    level = [0] * len(entries)
    above = -1  # highest level among nodes whose ci_low is strictly above the current ci_high
    cursor = 0
    i = 0
    count = len(entries)
    while i < count:
        h = highs[i]
        group_end = i + 1
        while group_end < count and highs[group_end] == h:
            group_end += 1
        while cursor < count and lows[by_low[cursor]] > h:
            above = max(above, level[by_low[cursor]])
            cursor += 1
        # Nodes starting exactly at h: wider ones (ci_high > h) already have a level.
        touching = -1
        scan = cursor
        while scan < count and lows[j := by_low[scan]] == h:
            if highs[j] > h:
                touching = max(touching, level[j])
            scan += 1
        # A point at h has edges to everything starting at or above h, bar its twins; the other
        # nodes of the group also have edges to those points.
        base = 1 + max(above, touching)
        wider = base + 1 if h in lows[i:group_end] else base
        for j in range(i, group_end):
            level[j] = base if lows[j] == h else wider
        i = group_end
    return {e[2]: lv for e, lv in zip(entries, level, strict=True)}


def has_edges(levels: Mapping[str, int]) -> bool:
    """Whether any node is clearly faster than another (some level above 0)."""
    return any(level > 0 for level in levels.values())
