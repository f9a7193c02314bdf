"""The P-Cores detector (SPEC 3, DSB Algorithm 3): level-0 nodes whose interval is clearly above a floor.

Its evidence comes from the window statistics alone (``WindowView.stats``), so it learns nothing between
windows. A node is a suspect when it has at least ``min_tasks`` samples, an interval, sits on P-Cores level
0, some edge exists at all (not every interval overlaps), and ``ci_low > significance_floor`` (None
disables the floor). Its score is ``ci_low``: the most clearly slow node first when the cap leaves fewer
places than suspects. ``still_slow`` marks a node with enough samples whose interval is above the floor
(above 0 when there is none) whatever its level; the decision layer does not use it yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress
from operator import is_not
from typing import Any

import numpy as np

from streams.core.detection.base import Evidence, WindowView
from streams.core.events import NormalizedTask
from streams.core.pcores import level_array
from streams.core.windows import NodeStats

_NO_LEVEL = -1  # the level of a node without an interval, in the arrays


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
        self._words: dict[int | tuple[int, int], str] = {}  # reasons by n, or by (level, depth), made once
        self._forget()

    def _forget(self) -> None:
        """A cache, not learned state: each node's statistics (the objects themselves: an id alone may be a freed
        object's), its evidence, and its interval, count and level in arrays by slot (a gone node's slot is
        reused)."""
        self._stats: dict[str, NodeStats] = {}
        self._evidence: dict[str, Evidence] = {}
        self._slot: dict[str, int] = {}
        self._names: list[str] = []  # slot -> node ("" when free)
        self._free: list[int] = []
        self._low, self._high = np.zeros(0), np.zeros(0)
        self._n = np.zeros(0, dtype=np.int64)
        self._ranked = np.zeros(0, dtype=bool)  # the slot holds a node with an interval
        self._levels = np.zeros(0, dtype=np.int64)  # _NO_LEVEL for a free slot or a node without an interval
        self._shape: tuple[bool, int] | None = None  # (edges, depth) of the last window

    def learn(self, sample: NormalizedTask) -> None:
        """Nothing to learn: the window statistics are the whole evidence."""
        return None

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        stats, held = window.stats, self._stats
        nodes = list(stats)
        changed = set(compress(nodes, map(is_not, map(held.get, nodes), stats.values())))
        changed.update(held.keys() - stats.keys())  # gone
        return self.detect_changed(window, changed)[0]

    def detect_changed(self, window: WindowView, changed: Iterable[str]) -> tuple[dict[str, Evidence], set[str]]:
        """``detect`` when only the nodes in ``changed`` may have other statistics (or none) than in the window
        this detector last saw; also the nodes whose evidence may differ from the last returned. Levels are
        computed over every node (a node's level moves with the others'), evidence again only for the nodes
        whose statistics or level changed, or all that the window's shape (edges, depth) words when it changed."""
        try:
            return self._detect(window.stats, changed)
        except BaseException:
            self._forget()  # half updated: start again from nothing next time
            raise

    def _detect(self, stats: Mapping[str, NodeStats], changed: Iterable[str]) -> tuple[dict[str, Evidence], set[str]]:
        held, evidence = self._stats, self._evidence
        judged = set()
        for node in changed:
            s = stats.get(node)
            if s is None:
                if held.pop(node, None) is not None:
                    self._release(node)
                    del evidence[node]
                    judged.add(node)
                continue
            held[node] = s
            self._place(node, s)
            judged.add(node)
        ranked = np.flatnonzero(self._ranked)
        levels = np.full(len(self._levels), _NO_LEVEL, dtype=np.int64)
        levels[ranked] = level_array(self._low[ranked], self._high[ranked], lambda i: self._names[ranked[i]])
        depth = 1 + int(levels.max(initial=_NO_LEVEL))
        edges = depth > 1  # some level above 0 (has_edges)
        again = levels != self._levels  # a free slot keeps _NO_LEVEL: never again
        if self._shape != (edges, depth):  # the words of every node judged on its level
            again |= (levels != _NO_LEVEL) & (self._n >= self.min_tasks)
        self._shape, self._levels = (edges, depth), levels
        names = self._names
        judged.update(map(names.__getitem__, np.flatnonzero(again).tolist()))
        level_of = levels.tolist()
        slot = self._slot
        for node in judged:
            s = held.get(node)
            if s is not None:
                level = level_of[slot[node]]
                evidence[node] = self._judge(s, None if level == _NO_LEVEL else level, edges, depth)
        return dict(zip(stats, map(evidence.__getitem__, stats), strict=True)), judged  # in the window's order

    def _place(self, node: str, s: NodeStats) -> None:
        at = self._slot.get(node)
        if at is None:
            if not self._free:
                self._grow()
            at = self._slot[node] = self._free.pop()
            self._names[at] = node
        has = s.ci_low is not None  # ci_high is None exactly when ci_low is (n < 2)
        self._ranked[at] = has
        self._n[at] = s.n
        if has:
            self._low[at], self._high[at] = s.ci_low, s.ci_high

    def _release(self, node: str) -> None:
        at = self._slot.pop(node)
        self._names[at] = ""
        self._ranked[at] = False
        self._levels[at] = _NO_LEVEL
        self._free.append(at)

    def _grow(self) -> None:
        size = len(self._names)
        more = max(64, size)
        self._names.extend([""] * more)
        self._low = np.concatenate((self._low, np.zeros(more)))
        self._high = np.concatenate((self._high, np.zeros(more)))
        self._n = np.concatenate((self._n, np.zeros(more, dtype=np.int64)))
        self._ranked = np.concatenate((self._ranked, np.zeros(more, dtype=bool)))
        self._levels = np.concatenate((self._levels, np.full(more, _NO_LEVEL, dtype=np.int64)))
        self._free.extend(range(size + more - 1, size - 1, -1))  # popped from the end: lowest slot first

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
