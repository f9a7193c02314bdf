"""The P-Cores detector (SPEC 3, DSB Algorithm 3): level-0 nodes whose interval is clearly above a floor.

Its evidence comes from the window statistics alone (``WindowView.stats``), so it learns nothing between
windows. A node is a suspect when it has at least ``min_tasks`` samples, an interval, sits on P-Cores level
0, some edge exists at all (not every interval overlaps), and ``ci_low > significance_floor`` (None
disables the floor). Its score is ``ci_low``: the most clearly slow node first when the cap leaves fewer
places than suspects. ``still_slow`` marks a node with enough samples whose interval is above the floor
(above 0 when there is none) whatever its level; the decision layer does not use it yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

import numpy as np

from streams.core.detection.base import Evidence, WindowView
from streams.core.events import NormalizedTask
from streams.core.pcores import level_list
from streams.core.windows import NodeStats

_LOW, _HIGH, _NODE = attrgetter("ci_low"), attrgetter("ci_high"), attrgetter("node_id")


class PCoresDetector:
    """Suspect the clearly slow nodes of P-Cores level 0, with the statistics behind it in words.

    >>> from streams.core.windows import summarize
    >>> stats = {"a": summarize("a", [1.0, 1.2, 1.1, 1.3, 1.2]),
    ...          "b": summarize("b", [0.0, 0.1, -0.1, 0.05, 0.0])}
    >>> evidence = PCoresDetector(min_tasks=5).detect(WindowView(0, 3_600_000_000, stats))
    >>> evidence["a"].suspect, evidence["a"].level, round(evidence["a"].score, 3)
    (True, 0, 1.033)
    >>> evidence["b"].suspect, evidence["b"].reason
    (False, 'not level 0 (level 1 of 2)')
    """

    name = "pcores"
    learns_from_samples = False  # the window statistics are its whole evidence: summaries serve it (#18)

    def __init__(self, min_tasks: int = 5, significance_floor: float | None = 0.25,
                 confidence: float = 0.95) -> None:
        self.min_tasks = min_tasks
        self.significance_floor = significance_floor
        self.confidence = confidence
        # A cache, not learned state: what each node's evidence was computed from, and that evidence.
        self._keys: dict[str, tuple[NodeStats, int | None]] = {}
        self._evidence: dict[str, Evidence] = {}
        self._shape: tuple[bool, int] | None = None  # (edges, depth) of the last window
        self._words: dict[int | tuple[int, int], str] = {}  # reasons by n, or by (level, depth), made once

    def learn(self, sample: NormalizedTask) -> None:
        """Nothing to learn: the window statistics are the whole evidence."""
        return None

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        stats = window.stats
        # ci_high is None exactly when ci_low is (n < 2): the nodes with an interval, their bounds as arrays.
        ranked = [s for s in stats.values() if s.ci_low is not None]
        count = len(ranked)
        lows = np.fromiter(map(_LOW, ranked), np.float64, count)
        highs = np.fromiter(map(_HIGH, ranked), np.float64, count)
        ranked_nodes = list(map(_NODE, ranked))
        level_of = dict(zip(ranked_nodes, level_list(ranked_nodes, lows, highs), strict=True))
        depth = 1 + max(level_of.values(), default=-1)
        edges = depth > 1  # some level above 0 (has_edges)
        # Most nodes keep their statistics (the same NodeStats object) and level from one period to the next
        # (two thirds of them on the Google 2011 trace): their evidence is reused rather than rebuilt. Edges
        # and depth change a reason only once a node has the samples and interval to be judged on them.
        keys, evidence, min_tasks = self._keys, self._evidence, self.min_tasks
        same_shape = self._shape == (edges, depth)
        self._shape = (edges, depth)
        new_keys: dict[str, tuple[NodeStats, int | None]] = {}
        new_evidence: dict[str, Evidence] = {}
        get_key, get_level = keys.get, level_of.get
        for node, s in stats.items():
            level = get_level(node)
            new_keys[node] = (s, level)
            old = get_key(node)
            if (old is not None and old[0] is s and old[1] == level
                    and (same_shape or level is None or s.n < min_tasks)):
                new_evidence[node] = evidence[node]
            else:
                new_evidence[node] = self._judge(s, level, edges, depth)
        self._keys, self._evidence = new_keys, new_evidence
        return new_evidence

    def _judge(self, s: NodeStats, level: int | None, edges: bool, depth: int) -> Evidence:
        why_not = self._ineligible(s, level, edges, depth)
        score = float("-inf") if s.ci_low is None else s.ci_low
        reason = why_not if why_not is not None else self._why_slow(s, depth)
        return Evidence(s.node_id, why_not is None, score, reason, self._still_slow(s), level)

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        return None

    def _ineligible(self, s: NodeStats, level: int | None, edges: bool, depth: int) -> str | None:
        if s.n < self.min_tasks:
            few = self._words.get(s.n)  # thousands of nodes a period have too few samples: the same words
            if few is None:
                few = self._words[s.n] = f"too few samples: n={s.n} < min_tasks {self.min_tasks}"
            return few
        if s.ci_low is None or level is None:
            return f"no interval: n={s.n}"
        if not edges:
            return "all intervals overlap: no node is clearly slower than another"
        if level > 0:
            words = self._words.get((level, depth))
            if words is None:
                words = self._words[level, depth] = f"not level 0 (level {level} of {depth})"
            return words
        floor = self.significance_floor
        if floor is not None and s.ci_low <= floor:
            return f"not clearly slow: ci_low {s.ci_low:+.3f} <= significance floor {floor:g}"
        return None

    def _still_slow(self, s: NodeStats) -> bool:
        floor = 0.0 if self.significance_floor is None else self.significance_floor
        return s.n >= self.min_tasks and s.ci_low is not None and s.ci_low > floor

    def _why_slow(self, s: NodeStats, depth: int) -> str:
        assert s.ci_low is not None and s.ci_high is not None
        reason = (
            f"level 0 of {depth} (nothing clearly slower): its {s.n} tasks ran {s.mean:+.2f} job standard "
            f"deviations from their jobs' means on average (std {s.std:.2f}), {self.confidence:.0%} "
            f"interval [{s.ci_low:+.2f}, {s.ci_high:+.2f}]"
        )
        floor = self.significance_floor
        return reason + (f" clearly above the significance floor {floor:g}" if floor is not None else "")
