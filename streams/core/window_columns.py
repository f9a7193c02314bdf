"""The windows' groups of moments as columns, so each period's dirty nodes are combined at once (issue 18).

``NodeWindows`` keeps every contribution in dicts (node -> bucket -> key -> groups), which its snapshot, its
redelivery rules and its expiry walk. Its statistics walked them too, node by node: ~3 k recomputed nodes a
period on the Google 2011 trace, ~2 buckets, ~4 keys and ~7 groups each, and that walk was most of the cost
(session 14, h60 and h63, in docs/scale.md). Here the same groups also sit end to end in columns (node, bucket,
n, mean, M2), appended in blocks, one block per contribution key; replacing a key kills its block, an expired
bucket is left out by a mask and dropped at the next compaction. A period's statistics select the live groups of
the dirty nodes inside the window with one mask, order them by node, and combine every node at once.

The results are ``combine``'s bit for bit: n is an integer sum; the mean and M2 are exactly rounded sums (one or
two terms added by numpy in ``sum``'s order, more by ``math.fsum``, as ``streams.core.windows._combined``), of
terms made by the same IEEE operations in the same order; squares by the C library's ``pow`` as Python's
``x ** 2`` (``numpy.float_power``, not ``x * x``, which differs in the last bit for about 1 value in 1,200).
Exactly rounded sums do not depend on the order of their terms, so neither does anything here on the order of
the groups.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import chain
from operator import itemgetter

import numpy as np

Signed = tuple[int, float, float]  # (n, mean, M2); n and M2 negative for withdrawn values
Part = tuple[int, str, Sequence[Signed]]  # (bucket, node, its groups)
_BUCKET, _NODE, _GROUPS = itemgetter(0), itemgetter(1), itemgetter(2)


class _Numbers(dict[str, int]):
    """Node id -> its number, a new id numbered on its first look-up."""

    def __missing__(self, node: str) -> int:
        number = self[node] = len(self)
        return number


def exact_sums(lens: np.ndarray, starts: np.ndarray, column: np.ndarray) -> np.ndarray:
    """The exactly rounded sum of each segment ``column[starts[i]:starts[i] + lens[i]]`` (every one non-empty).

    >>> exact_sums(np.array([1, 2, 3]), np.array([0, 1, 3]), np.array([0.1, 0.1, 0.2, 1e16, 1.0, -1e16])).tolist()
    [0.1, 0.30000000000000004, 1.0]
    """
    # sum([a]) and sum([a, b]) start from the int 0: 0.0 + a, as sum, turns a -0.0 into 0.0.
    sums: np.ndarray = 0.0 + column[starts]
    two = np.flatnonzero(lens == 2)
    sums[two] += column[starts[two] + 1]
    long = np.flatnonzero(lens > 2)
    if len(long):
        terms, fsum = column.tolist(), math.fsum
        ends = starts[long] + lens[long]
        sums[long] = [fsum(terms[a:b]) for a, b in zip(starts[long].tolist(), ends.tolist(), strict=True)]
    return sums


class GroupColumns:
    """Groups of moments by node and bucket, in blocks by contribution key; dirty nodes' window moments at once.

    >>> columns = GroupColumns()
    >>> columns.put("a", [(0, "n1", [(2, 1.5, 0.5), (1, 4.0, 0.0)]), (10, "n2", [(1, 3.0, 0.0)])])
    >>> columns.put("b", [(0, "n1", [(-1, 4.0, -0.0)])])
    >>> nodes, n, mean, m2 = columns.combined({"n1", "n2"}, 0, 10)
    >>> nodes, n.tolist(), mean.tolist(), m2.tolist()
    (['n1'], [2], [1.5], [0.5])
    >>> columns.put("b", [])  # "b" replaced by nothing: its withdrawal leaves
    >>> columns.combined({"n1"}, 0, 20)[1].tolist()
    [3]
    """

    def __init__(self) -> None:
        self._index = _Numbers()  # node id -> its number in the node column
        self._blocks: dict[Hashable, tuple[int, int]] = {}  # key -> [first, end) of its groups
        self._alive = bytearray()  # 0 once the group's key was replaced
        self._size = 0  # groups in the arrays; the ones after them wait in the lists below
        self._node, self._bucket = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._n, self._mean, self._m2 = np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        self._pending: list[Part] = []  # put since the last flush, in order
        self._count = 0  # groups in the columns and pending
        self._dead = 0  # killed groups still in the columns (expired ones are counted at compaction)

    def put(self, key: Hashable, parts: Sequence[Part]) -> None:
        """The groups of ``key`` as ``(bucket, node, groups)`` parts, replacing the key's earlier ones."""
        old = self._blocks.pop(key, None)
        if old is not None:
            first, end = old
            self._alive[first:end] = bytes(end - first)
            self._dead += end - first
        # Thousands of parts a period: kept as they are, made columns in bulk at the next flush.
        count = sum(map(len, map(_GROUPS, parts)))
        if count:
            self._pending.extend(parts)
            self._alive.extend(b"\x01" * count)
            self._blocks[key] = (self._count, self._count + count)
            self._count += count

    def _flush(self) -> None:
        """The pending groups into the arrays (grown by doubling, so each group is converted once)."""
        parts, size = self._pending, self._size
        added = self._count - size
        if not added:
            return
        lens = np.fromiter(map(len, map(_GROUPS, parts)), np.int64, len(parts))
        nodes = np.repeat(np.fromiter(map(self._index.__getitem__, map(_NODE, parts)), np.int64, len(parts)), lens)
        buckets = np.repeat(np.fromiter(map(_BUCKET, parts), np.int64, len(parts)), lens)
        # (n, mean, M2) of every group in one float column: n is a small integer, exact as a float.
        values = np.fromiter(chain.from_iterable(chain.from_iterable(map(_GROUPS, parts))), np.float64, 3 * added)
        values = values.reshape(added, 3)
        capacity = len(self._n)
        if size + added > capacity:
            grown = max(2 * capacity, size + added, 1024)
            self._node, self._bucket, self._n, self._mean, self._m2 = (
                np.concatenate([column[:size], np.zeros(grown - size, column.dtype)])
                for column in (self._node, self._bucket, self._n, self._mean, self._m2))
        end = size + added
        self._node[size:end], self._bucket[size:end] = nodes, buckets
        self._n[size:end] = values[:, 0]
        self._mean[size:end], self._m2[size:end] = values[:, 1], values[:, 2]
        parts.clear()
        self._size = end

    def combined(self, dirty: set[str], start: int, end: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """``(nodes, n, mean, M2)`` of the groups in ``[start, end)`` of each node of ``dirty`` that has any there,
        as ``combine`` of them, those left with n <= 0 left out; the nodes in the order of their numbers."""
        self._flush()
        size = self._size
        self._compact(start, size)
        size = self._size
        numbered = np.fromiter(map(self._index.__getitem__, dirty), np.int64, len(dirty))
        marked = np.zeros(len(self._index), dtype=bool)
        marked[numbered] = True
        node, bucket = self._node[:size], self._bucket[:size]
        alive = np.frombuffer(self._alive, dtype=np.uint8, count=size).astype(bool)  # a copy: no export held
        chosen = np.flatnonzero(alive & marked[node] & (bucket >= start) & (bucket < end))
        chosen = chosen[np.argsort(node[chosen], kind="stable")]
        owners = node[chosen]
        numbers, starts, lens = np.unique(owners, return_index=True, return_counts=True)
        counts, means, m2s = self._n[chosen], self._mean[chosen], self._m2[chosen]
        n = np.add.reduceat(counts, starts) if len(chosen) else np.zeros(0, np.int64)
        positive = n > 0
        if not positive.all():  # withdrawn to nothing: left out unsummed, as combine does (a review found fsum
            # raising on such a node's poisoned values, where main returned early)
            kept = np.repeat(positive, lens)
            numbers, lens, n = numbers[positive], lens[positive], n[positive]
            counts, means, m2s = counts[kept], means[kept], m2s[kept]
            starts = np.cumsum(lens) - lens
        mean = exact_sums(lens, starts, counts * means) / n
        squares = np.float_power(means - np.repeat(mean, lens), 2.0)  # Python's (m - mean) ** 2
        m2 = exact_sums(lens, starts, m2s + counts * squares)
        names = list(self._index)  # in the order of their numbers
        return [names[i] for i in numbers.tolist()], n, mean, np.where(m2 < 0.0, 0.0, m2)  # as max(m2, 0.0)

    def _compact(self, start: int, size: int) -> None:
        """Drop the killed and expired groups once they are at least half the columns; blocks move with them."""
        expired = int(np.count_nonzero(self._bucket[:size] < start)) if self._dead * 2 < size else 0
        if (self._dead + expired) * 2 < size or size < 1024:
            return
        alive = np.frombuffer(self._alive, dtype=np.uint8, count=size).astype(bool)
        keep = alive & (self._bucket[:size] >= start)
        before = np.zeros(size + 1, dtype=np.int64)  # groups kept before each position
        np.cumsum(keep, out=before[1:])
        kept = int(before[-1])
        for column in (self._node, self._bucket, self._n, self._mean, self._m2):
            column[:kept] = column[:size][keep]
        blocks = {}
        for key, (first, last) in self._blocks.items():
            a, b = int(before[first]), int(before[last])
            if b > a:
                blocks[key] = (a, b)
        self._blocks = blocks
        self._alive = bytearray(b"\x01" * kept)
        self._size, self._count, self._dead = kept, kept, 0
