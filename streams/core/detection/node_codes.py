"""The running-task detector's nodes by their codes in its task table (``TaskTable.node_names``): their name order
(the order it makes their evidence in, kept from one boundary to the next instead of sorted again), a set of them
by code, and per-node values as a column by code.

The table's list of names only grows (a new node is appended) until a compaction gives it a new list, so the order
is kept while the list is the same object and only its new names are merged in (session 27: sorting ~10 k judged
names a boundary was ~5 % of the detector's time on Google 2011).

>>> order = NameOrder()
>>> names = ["n3", "n1", "n2"]
>>> codes, nodes = order.judged(names, np.array([True, True, False]))
>>> codes.tolist(), nodes.tolist()
([1, 0], ['n1', 'n3'])
>>> names.append("n0")
>>> [c.tolist() for c in order.judged(names, np.array([True, False, True, True]))]
[[3, 2, 0], ['n0', 'n2', 'n3']]
>>> [c.tolist() for c in order.judged([], np.zeros(0, dtype=bool))]  # a compaction that kept no node
[[], []]
>>> by_code({"n2": 7, "nx": 9}, {"n1": 0, "n2": 1}, 3, -1).tolist()
[-1, 7, -1]
>>> "n2" in CodeSet({"n1": 1, "n2": 2}, np.array([True, True, False])), "n1" in CodeSet({"n1": 1}, np.ones(2, bool))
(False, True)
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt


class NameOrder:
    """Codes ``0 .. len(names) - 1`` sorted by their names, for one list of unique names that only grows."""

    def __init__(self) -> None:
        self._names: list[str] | None = None
        self._keys: list[str] = []  # the names, sorted
        self._codes: list[int] = []  # their codes
        self._order: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._sorted: npt.NDArray[np.object_] = np.zeros(0, dtype=object)

    def judged(self, names: list[str], judged: npt.NDArray[np.bool_]
               ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.object_]]:
        """The codes marked in ``judged`` (one flag per name) in the order of their names, and those names."""
        if names is not self._names:  # a new list (a compaction): codes name other nodes
            self._names, self._keys, self._codes = names, [], []
            self._order, self._sorted = np.zeros(0, dtype=np.intp), np.zeros(0, dtype=object)
        if len(names) > len(self._codes):
            self._merge(names)
        take = judged[self._order]
        return self._order[take], self._sorted[take]

    def _merge(self, names: list[str]) -> None:
        new = sorted(range(len(self._codes), len(names)), key=names.__getitem__)
        if 16 * len(new) < len(self._codes):  # a few new nodes: inserted where they belong
            for code in new:
                at = bisect.bisect(self._keys, names[code])
                self._keys.insert(at, names[code])
                self._codes.insert(at, code)
        else:  # two sorted runs, merged by the sort
            self._codes = sorted(self._codes + new, key=names.__getitem__)
            self._keys = [names[code] for code in self._codes]
        self._order = np.array(self._codes, dtype=np.intp)
        self._sorted = np.fromiter(self._keys, dtype=object, count=len(self._keys))


class CodeSet:
    """The nodes whose code (``codes``) is marked in ``mask``: a container to test membership in, without a set of
    their names."""

    def __init__(self, codes: Mapping[str, int], mask: npt.NDArray[np.bool_]) -> None:
        self._codes, self._mask = codes, mask

    def __contains__(self, node: object) -> bool:
        code = self._codes.get(node) if isinstance(node, str) else None
        return code is not None and bool(self._mask[code])


def by_code(values: Mapping[str, int], codes: Mapping[str, int], size: int, missing: int) -> npt.NDArray[np.int64]:
    """``values`` as a column of ``size`` entries by node code (``codes``), ``missing`` where a code has no value."""
    out = np.full(size, missing, dtype=np.int64)
    at = np.fromiter(map(codes.get, values, itertools.repeat(-1)), dtype=np.int64, count=len(values))
    out[at[at >= 0]] = np.fromiter(values.values(), dtype=np.int64, count=len(values))[at >= 0]
    return out
