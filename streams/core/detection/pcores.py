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
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

import numpy as np

from streams.core.detection.base import Evidence, WindowView
from streams.core.events import NormalizedTask
from streams.core.pcores import level_list
from streams.core.windows import NodeStats

_LOW, _HIGH, _NODE, _N = attrgetter("ci_low"), attrgetter("ci_high"), attrgetter("node_id"), attrgetter("n")
_NO_LEVEL = -1  # the level of a node without an interval, in the arrays
_NONE = Evidence("", False, 0.0, "")  # a place not yet filled (never returned)


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
        self._position: dict[str, int] = {}  # node -> its index in the lists and arrays below (last window)
        self._values: list[NodeStats] = []  # the statistics themselves: reuse is decided on their identity
        self._levels = np.zeros(0, dtype=np.int64)
        self._evidence: list[Evidence] = []
        self._shape: tuple[bool, int] | None = None  # (edges, depth) of the last window
        self._words: dict[int | tuple[int, int], str] = {}  # reasons by n, or by (level, depth), made once

    def learn(self, sample: NormalizedTask) -> None:
        """Nothing to learn: the window statistics are the whole evidence."""
        return None

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        stats = window.stats
        nodes, values = list(stats), list(stats.values())
        count = len(nodes)
        # ci_high is None exactly when ci_low is (n < 2): the nodes with an interval, their bounds as arrays.
        has = [s.ci_low is not None for s in values]
        ranked = list(compress(values, has))
        lows = np.fromiter(map(_LOW, ranked), np.float64, len(ranked))
        highs = np.fromiter(map(_HIGH, ranked), np.float64, len(ranked))
        levels = np.full(count, _NO_LEVEL, dtype=np.int64)
        levels[np.array(has, dtype=bool)] = level_list(list(map(_NODE, ranked)), lows, highs)
        depth = 1 + int(levels.max(initial=_NO_LEVEL))
        edges = depth > 1  # some level above 0 (has_edges)
        same_shape = self._shape == (edges, depth)
        self._shape = (edges, depth)
        # Most nodes keep their statistics (the same NodeStats object) and level from one period to the next: their
        # evidence is reused. The identity is tested against last period's objects themselves, held in _values (an
        # id alone may be a freed object's, reused by a new one); the levels in numpy. Edges and depth change a
        # reason only once a node has the samples and interval to be judged on them.
        before = np.fromiter(map(self._position.get, nodes, repeat(-1)), np.int64, count)
        at = np.where(before >= 0, before, 0)
        same = before >= 0
        if self._values:
            held = map(self._values.__getitem__, at.tolist())
            same &= np.fromiter(map(is_, held, values), np.bool_, count) & (self._levels[at] == levels)
            if not same_shape:
                same &= (levels == _NO_LEVEL) | (np.fromiter(map(_N, values), np.int64, count) < self.min_tasks)
        old = self._evidence
        evidence = list(map(old.__getitem__, at.tolist())) if old else [_NONE] * count
        level_of = levels.tolist()
        for i in np.flatnonzero(~same).tolist():
            level = level_of[i]
            evidence[i] = self._judge(values[i], None if level == _NO_LEVEL else level, edges, depth)
        self._position = dict(zip(nodes, range(count), strict=True))
        self._values, self._levels, self._evidence = values, levels, evidence
        return dict(zip(nodes, evidence, strict=True))

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
