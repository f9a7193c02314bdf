"""The rows of a ranking in order, carried from one period to the next when their inputs did not change.

A ranking lists every node of the window (6-9 k a period on the Google 2011 trace) ordered by P-Cores level
(None last), then node id. About half of them keep their statistics, evidence and verdict (the very same
objects) from one period to the next, so their rows are reused; which ones is found with C-level passes and
numpy over the objects' identities, not with a Python loop over every node, and the order comes from one stable
sort of the levels over the node ids sorted once.

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
from itertools import repeat

import numpy as np

from streams.core.decision.policy import Verdict
from streams.core.detection.base import Evidence
from streams.core.ranking import NodeRank
from streams.core.windows import NodeStats

_LAST = np.iinfo(np.int64).max  # the sort key of a row without a level: after every level
_NONE = NodeRank("", None, None, False, False, "")  # a place not yet filled (never returned)


class RowCache:
    """``ordered`` builds each period's rows, reusing a row when its statistics, evidence and verdict are the
    objects it was built from. A cache, not state: a new one (a restore) builds every row again, equal to the
    ones it replaces."""

    def __init__(self) -> None:
        self._position: dict[str, int] = {}  # node -> its index in the lists below (last period)
        self._rows: list[NodeRank] = []
        # What each row was built from. Holding them keeps their ids from being reused by new objects, so equal
        # ids below mean the same objects.
        self._inputs: tuple[list[Verdict], list[Evidence | None], list[NodeStats | None]] = ([], [], [])
        self._ids = np.zeros((3, 0), dtype=np.int64)
        self._keys = np.zeros(0, dtype=np.int64)  # each row's level (_LAST: none)

    def ordered(self, stats: Mapping[str, NodeStats], evidence: Mapping[str, Evidence],
                verdicts: Mapping[str, Verdict]) -> tuple[NodeRank, ...]:
        nodes = sorted(verdicts)
        count = len(nodes)
        inputs = (list(map(verdicts.__getitem__, nodes)), list(map(evidence.get, nodes)), list(map(stats.get, nodes)))
        ids = np.array([np.fromiter(map(id, objects), np.int64, count) for objects in inputs]).reshape(3, count)
        before = np.fromiter(map(self._position.get, nodes, repeat(-1)), np.int64, count)
        known = before >= 0
        same = known.copy()
        if self._ids.shape[1]:
            same &= (self._ids[:, np.where(known, before, 0)] == ids).all(axis=0)
        # Reused rows gathered by their last position (0 as a stand-in where a new row goes), then the new ones.
        old_rows = self._rows
        rows = list(map(old_rows.__getitem__, np.where(same, before, 0).tolist())) if old_rows else [_NONE] * count
        # Each row's sort key, gathered the same way; a row without a level sorts after every level.
        keys = self._keys[np.where(same, before, 0)] if old_rows else np.zeros(count, dtype=np.int64)
        verdict_of, evidence_of, stats_of = inputs
        for i in np.flatnonzero(~same).tolist():
            v, e, s = verdict_of[i], evidence_of[i], stats_of[i]
            level = None if e is None else e.level
            rows[i] = NodeRank(nodes[i], s, level, v.eligible, v.blacklisted, v.reason)
            keys[i] = _LAST if level is None else level
        self._position = dict(zip(nodes, range(count), strict=True))
        self._rows, self._inputs, self._ids, self._keys = rows, inputs, ids, keys
        return tuple(map(rows.__getitem__, np.argsort(keys, kind="stable").tolist()))
