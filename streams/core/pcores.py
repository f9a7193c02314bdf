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
    for node, (low, high) in intervals.items():
        if not low <= high:
            raise ValueError(f"interval of {node} is not ordered: ({low}, {high})")
    by_high = sorted(intervals, key=lambda v: (-intervals[v][1], -intervals[v][0], v))
    by_low = sorted(intervals, key=lambda v: -intervals[v][0])
    levels: dict[str, int] = {}
    above = -1  # highest level among nodes whose ci_low is strictly above the current ci_high
    cursor = 0
    i = 0
    while i < len(by_high):
        h = intervals[by_high[i]][1]
        group_end = i
        while group_end < len(by_high) and intervals[by_high[group_end]][1] == h:
            group_end += 1
        while cursor < len(by_low) and intervals[by_low[cursor]][0] > h:
            above = max(above, levels[by_low[cursor]])
            cursor += 1
        # Nodes starting exactly at h: wider ones (ci_high > h) already have a level.
        touching = -1
        scan = cursor
        while scan < len(by_low) and intervals[by_low[scan]][0] == h:
            if intervals[by_low[scan]][1] > h:
                touching = max(touching, levels[by_low[scan]])
            scan += 1
        points = [v for v in by_high[i:group_end] if intervals[v][0] == h]
        for v in points:  # a point at h has edges to everything starting at or above h, bar its twins
            levels[v] = 1 + max(above, touching)
        twins = max((levels[v] for v in points), default=-1)
        for v in by_high[i:group_end]:
            if v not in levels:
                levels[v] = 1 + max(above, touching, twins)
        i = group_end
    return levels


def has_edges(levels: Mapping[str, int]) -> bool:
    """Whether any node is clearly faster than another (some level above 0)."""
    return any(level > 0 for level in levels.values())
