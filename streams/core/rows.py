"""The rows of a ranking in order, carried from one period to the next when their inputs did not change.

A ranking lists every node of the window (6-9 k a period on the Google 2011 trace) ordered by P-Cores level
(None last), then node id. About half of them keep their statistics and verdict (the very same
objects) from one period to the next, so their rows are reused. (Finding them with numpy over the objects'
ids, as the P-Cores detector does, measured 10 % slower than this loop: the loop is ~1 us a node, and the
~3 k rows a period it builds cost the same either way.)

>>> from streams.core.decision.policy import Verdict
>>> from streams.core.detection.base import Evidence
>>> from streams.core.windows import summarize
>>> stats = {"a": summarize("a", [1.0, 1.2]), "b": summarize("b", [0.0, 0.1]), "c": summarize("c", [0.5])}
>>> evidence = {"a": Evidence("a", True, 0.9, "slow", level=0), "b": Evidence("b", False, 0.0, "fast", level=1),
...             "c": Evidence("c", False, 0.0, "too few", level=None)}
>>> verdicts = {node: Verdict(node, e.suspect, e.suspect, e.reason) for node, e in evidence.items()}
>>> rows = RowCache()
>>> first = rows.ordered(stats, evidence, verdicts)
>>> [(row.node_id, row.level) for row in first]
[('a', 0), ('b', 1), ('c', None)]
>>> all(x is y for x, y in zip(rows.ordered(stats, evidence, verdicts), first))  # nothing changed: the same rows
True
"""

from __future__ import annotations

from collections.abc import Mapping

from streams.core.decision.policy import Verdict
from streams.core.detection.base import Evidence
from streams.core.ranking import NodeRank
from streams.core.windows import NodeStats


class RowCache:
    """``ordered`` builds each period's rows, reusing a row when its statistics and verdict are the objects it was
    built from and its level is the same (all a row takes from the evidence). A cache, not state: a new one (a
    restore) builds every row again, equal to the ones it replaces."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Verdict, int | None, NodeStats | None, NodeRank]] = {}

    def ordered(self, stats: Mapping[str, NodeStats], evidence: Mapping[str, Evidence],
                verdicts: Mapping[str, Verdict]) -> tuple[NodeRank, ...]:
        # Node ids sorted once, then bucketed by level: cheaper than sorting the rows by a tuple key.
        by_level: dict[int, list[NodeRank]] = {}
        unranked: list[NodeRank] = []
        old, rows = self._rows, {}
        stats_of, evidence_of = stats.get, evidence.get
        for node in sorted(verdicts):
            v, e, s = verdicts[node], evidence_of(node), stats_of(node)
            level = None if e is None else e.level
            cached = old.get(node)
            if cached is not None and cached[0] is v and cached[2] is s and cached[1] == level:
                rows[node] = cached
                row = cached[3]
            else:
                row = NodeRank(node, s, level, v.eligible, v.blacklisted, v.reason)
                rows[node] = (v, level, s, row)
            level = row.level
            if level is None:
                unranked.append(row)
            elif (same := by_level.get(level)) is None:
                by_level[level] = [row]
            else:
                same.append(row)
        self._rows = rows
        return tuple(row for level in sorted(by_level) for row in by_level[level]) + tuple(unranked)
