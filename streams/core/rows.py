"""The rows of a ranking in order, carried from one period to the next when their inputs did not change.

A ranking lists every node of the window (6-9 k a period on the Google 2011 trace) ordered by P-Cores level
(None last), then node id. About half of them keep their statistics, evidence and verdict (the very same
objects) from one period to the next, so their rows are reused. Which ones is found by identity over whole
columns (``map`` of ``is_not`` over last period's objects, C loops), so Python code runs only for the rows that
changed (~3.4 k a period); the order is the node ids kept sorted from period to period (a new id merged in by
one sort of an almost sorted list), then a stable sort of positions by level.

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
from itertools import compress, filterfalse
from operator import is_not

from streams.core.decision.policy import Verdict
from streams.core.detection.base import Evidence
from streams.core.ranking import NodeRank
from streams.core.windows import NodeStats

_UNRANKED = float("inf")  # the sort key of a node without a level: after every int level, exactly


class RowCache:
    """``ordered`` builds each period's rows, reusing a row when its statistics, evidence and verdict are the
    objects it was built from. A cache, not state: a new one (a restore) builds every row again, equal to the
    ones it replaces."""

    def __init__(self) -> None:
        # What each row was built from (the objects themselves: an id alone may be a freed object's), the row,
        # its sort key by level, and the node ids in order.
        self._verdicts: dict[str, Verdict] = {}
        self._evidence: dict[str, Evidence | None] = {}
        self._stats: dict[str, NodeStats | None] = {}
        self._rows: dict[str, NodeRank] = {}
        self._levels: dict[str, float] = {}
        self._ids: list[str] = []

    def ordered(self, stats: Mapping[str, NodeStats], evidence: Mapping[str, Evidence],
                verdicts: Mapping[str, Verdict]) -> tuple[NodeRank, ...]:
        nodes = list(verdicts)
        now_v = list(verdicts.values())
        now_e, now_s = list(map(evidence.get, nodes)), list(map(stats.get, nodes))
        changed = set(compress(nodes, map(is_not, map(self._verdicts.get, nodes), now_v)))
        changed.update(compress(nodes, map(is_not, map(self._evidence.get, nodes), now_e)))
        changed.update(compress(nodes, map(is_not, map(self._stats.get, nodes), now_s)))
        self._verdicts, self._evidence = dict(zip(nodes, now_v, strict=True)), dict(zip(nodes, now_e, strict=True))
        self._stats = dict(zip(nodes, now_s, strict=True))
        self._rebuild(changed, nodes)
        rows, ids = self._rows, self._ids
        keys = list(map(self._levels.__getitem__, ids))
        in_ids = list(map(rows.__getitem__, ids))
        # Stable: one level's rows stay in node id order.
        return tuple(map(in_ids.__getitem__, sorted(range(len(ids)), key=keys.__getitem__)))

    def _rebuild(self, changed: set[str], nodes: list[str]) -> None:
        """New rows for the changed nodes, none for the nodes gone; the ids sorted again when some came or went."""
        rows, levels, verdicts, evidence, stats = self._rows, self._levels, self._verdicts, self._evidence, self._stats
        added = [node for node in changed if node not in rows]
        for node in changed:
            v, e = verdicts[node], evidence[node]
            level = None if e is None else e.level
            rows[node] = NodeRank(node, stats[node], level, v.eligible, v.blacklisted, v.reason)
            levels[node] = _UNRANKED if level is None else level
        gone = rows.keys() - verdicts.keys() if len(rows) != len(nodes) else set()
        for node in gone:
            del rows[node], levels[node]
        if added or gone:
            ids = list(filterfalse(gone.__contains__, self._ids)) if gone else self._ids
            ids.extend(added)
            ids.sort()  # sorted runs and a short tail: one merge
            self._ids = ids
