"""Per-node statistics of z-values over hopping event-time windows (DSB Algorithm 2, ML-NA).

The window ending at ``end`` covers event times ``[end - window_size_us, end)``; ends fall on
multiples of ``step_us`` (hopping windows: size 1 h, step = the ranking period, 5 min, by default).
For each node: n, mean, population std (DSB divides by n) and the Student-t interval
``mean ± t(confidence/2 + 1/2, n-1) · std / √n`` (none for n < 2). ML-NA's task count normalised
against all nodes of the window is ``n / mean_count`` (``mean_count``: the mean n over the nodes seen),
so 1.0 is an average load.

What the windows store is moments (``streams.core.moments``) per node and per *bucket* of task finish time,
``bucket_width(window, step)`` wide, so that every window is a whole number of buckets and its statistics are
exact. Each contribution has a key and replaces an earlier one of the same key: a single sample is keyed by
(job_id, task_id), so a redelivered sample does not count twice; a ``NodeSummary`` from a normalising partition
by (partition, boundary), so a redelivered summary replaces itself, and the provisional values it withdraws
leave with it. A node's statistics combine its contributions with exactly rounded sums (``combine``): they do
not depend on the order in which contributions arrived.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import mul
from typing import Any

import numpy as np

from streams.core.events import NodeMoments, NodeSummary, NormalizedTask
from streams.core.moments import EMPTY, Moments, bucket_width, moments_of
from streams.core.window_columns import GroupColumns

# 2: moments per node and bucket instead of single samples (issue 18).
SNAPSHOT_VERSION = 2

_Key = tuple[str | int, ...]  # ("task", job, task) or ("summary", partition, boundary)
_Signed = tuple[int, float, float]  # (n, mean, M2) of added values; n and M2 negative for withdrawn ones
_Cell = dict[_Key, list[_Signed]]  # key -> its groups of values in one bucket of one node


@dataclass(frozen=True, slots=True)
class NodeStats:
    """One node's window statistics; ``ci_low``/``ci_high`` are None when n < 2."""

    node_id: str
    n: int
    mean: float
    std: float
    ci_low: float | None
    ci_high: float | None


@lru_cache(maxsize=4096)
def t_quantile(n: int, confidence: float = 0.95) -> float:
    """The two-sided Student-t critical value for n samples (n - 1 degrees of freedom)."""
    # Imported here: scipy.stats takes most of a second to import, and settings validation imports the
    # registries, hence this module, in every command, most of which never compute an interval.
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.ppf(0.5 + confidence / 2.0, n - 1))


def summarize(node_id: str, values: list[float], confidence: float = 0.95) -> NodeStats:
    """Statistics of one node's z-values, as DSB Algorithm 2 computes them (population std).

    >>> s = summarize("n1", [0.0, 1.0, 2.0])
    >>> s.n, s.mean, round(s.std, 6), round(s.ci_low, 6), round(s.ci_high, 6)
    (3, 1.0, 0.816497, -1.02829, 3.02829)
    >>> summarize("n2", [0.5]).ci_low is None
    True
    """
    n = len(values)
    if n == 0:
        raise ValueError("a node needs at least one sample")
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
    if n < 2:
        return NodeStats(node_id, n, mean, std, None, None)
    half = t_quantile(n, confidence) * std / math.sqrt(n)
    return NodeStats(node_id, n, mean, std, mean - half, mean + half)


class NodeWindows:
    """Keep each node's recent z-values as moments per bucket and summarise the window ending at an event time.

    >>> windows = NodeWindows(window_size_us=3_600_000_000, step_us=300_000_000)
    >>> for i, z in enumerate([0.1, 0.3, 0.2]):
    ...     windows.update(NormalizedTask("j", f"t{i}", 0, "n1", 1_000_000 * i, 10, z))
    >>> windows.advance(600_000_000)
    (-3000000000, 600000000)
    >>> s = windows.stats()["n1"]
    >>> s.n, round(s.mean, 6), s.n / windows.mean_count
    (3, 0.2, 1.0)
    >>> windows.advance(4_200_000_000)  # an hour later every sample has expired
    (600000000, 4200000000)
    >>> windows.stats()
    {}
    """

    def __init__(self, window_size_us: int = 3_600_000_000, step_us: int = 300_000_000,
                 confidence: float = 0.95) -> None:
        if window_size_us <= 0 or step_us <= 0:
            raise ValueError("window_size_us and step_us must be positive")
        self.window_size_us = window_size_us
        self.step_us = step_us
        self.bucket_us = bucket_width(window_size_us, step_us)
        self.confidence = confidence
        t_quantile(2, confidence)  # scipy's import (most of a second) belongs to set-up, not to the first period
        self._reset()

    def _reset(self) -> None:
        self._total = 0  # sum of n over the cached nodes
        self._cells: dict[str, dict[int, _Cell]] = {}  # node -> bucket start -> contributions
        self._buckets: dict[int, set[str]] = {}  # bucket start -> nodes with contributions in it
        self._where: dict[_Key, set[tuple[int, str]]] = {}  # key -> the cells it contributes to
        self._dirty: set[str] = set()
        self._columns = GroupColumns()  # the same groups as _cells, as columns: what stats() combines
        self._cache: dict[str, NodeStats] = {}
        self._end: int | None = None
        self.late_samples = 0

    @property
    def window(self) -> tuple[int, int] | None:
        """``(start_us, end_us)`` of the current window, None before the first ``advance``."""
        return None if self._end is None else (self._end - self.window_size_us, self._end)

    @property
    def stored_samples(self) -> int:
        """Contributions stored (single samples, or one per node and bucket of a summary)."""
        return sum(len(cell) for buckets in self._cells.values() for cell in buckets.values())

    def update(self, sample: NormalizedTask) -> None:
        """Add one z-value; a sample older than the current window is counted as late and dropped."""
        bucket = sample.ts_us - sample.ts_us % self.bucket_us
        self._put(("task", sample.job_id, sample.task_id), {(bucket, sample.node_id): [(1, sample.z, 0.0)]})

    def merge(self, summary: NodeSummary) -> None:
        """Add a partition's summary; it replaces an earlier one of the same partition and boundary."""
        if self.bucket_us % summary.bucket_width_us:
            raise ValueError(f"summary buckets of {summary.bucket_width_us} us do not fit windows of "
                             f"{self.window_size_us} us stepping {self.step_us} us")
        parts: dict[tuple[int, str], list[_Signed]] = {}
        width, get = self.bucket_us, parts.get
        # A summary's moments are one per node and bucket of its own width: one group per part unless the
        # windows' buckets are wider or a bucket has added and withdrawn values. (No list made per lookup.)
        for side, sign in ((summary.added, 1), (summary.removed, -1)):  # withdrawn: negative count and M2
            for m in side:
                bucket = m.bucket_us
                part = (bucket - bucket % width, m.node_id)
                group = (m.n, m.mean, m.m2) if sign > 0 else (-m.n, m.mean, -m.m2)
                groups = get(part)
                if groups is None:
                    parts[part] = [group]
                else:
                    groups.append(group)
        self._put(("summary", summary.partition, summary.boundary_us), parts)

    def _put(self, key: _Key, parts: dict[tuple[int, str], list[_Signed]]) -> None:
        for bucket, node in self._where.pop(key, ()):
            cell = self._cells.get(node, {}).get(bucket)
            if cell is not None and cell.pop(key, None) is not None:
                self._touch(bucket, node)
        # Once per node and bucket of every summary (thousands a period): look-ups, no method call per part.
        cells, buckets, dirty, end = self._cells, self._buckets, self._dirty, self._end
        start = None if end is None else end - self.window_size_us
        where = set()
        taken = []
        for part, signed in parts.items():
            bucket, node = part
            if start is not None and bucket < start:
                self.late_samples += max(0, sum(n for n, _, _ in signed))  # net values never counted
                continue
            taken.append((bucket, node, signed))
            node_cells = cells.get(node)
            if node_cells is None:
                node_cells = cells[node] = {}
            cell = node_cells.get(bucket)
            if cell is None:
                node_cells[bucket] = {key: signed}
            else:
                cell[key] = signed
            nodes = buckets.get(bucket)
            if nodes is None:
                buckets[bucket] = {node}
            else:
                nodes.add(node)
            if end is None or bucket < end:  # as _touch
                dirty.add(node)
            where.add(part)
        if where:
            self._where[key] = where
        self._columns.put(key, taken)

    def _touch(self, bucket: int, node: str) -> None:
        if self._end is None or bucket < self._end:
            self._dirty.add(node)

    def advance(self, now_us: int) -> tuple[int, int]:
        """Move to the window ending at the last step boundary at or before ``now_us``; never back."""
        end = now_us - now_us % self.step_us
        previous = self._end
        if previous is not None and end < previous:
            end = previous
        self._end = end
        start = end - self.window_size_us
        for bucket in [b for b in self._buckets if b < start or ((previous is None or b >= previous) and b < end)]:
            self._dirty.update(self._buckets[bucket])
            if bucket < start:  # expired
                for node in self._buckets.pop(bucket):
                    buckets = self._cells[node]
                    for key in buckets.pop(bucket):
                        self._forget(key, bucket, node)
                    if not buckets:
                        del self._cells[node]
        return start, end

    def _forget(self, key: _Key, bucket: int, node: str) -> None:
        where = self._where.get(key)
        if where is not None:
            where.discard((bucket, node))
            if not where:
                del self._where[key]

    def stats(self) -> dict[str, NodeStats]:
        """Statistics of every node with at least one sample in the current window."""
        window = self.window
        if window is None:
            return {}
        start, end = window
        cache, count, dirty = self._cache, self._total, self._dirty
        # The dirty nodes (~3 k a period on the Google 2011 trace) combined at once over columns; only making
        # their NodeStats is a loop, in the dirty set's order as before (the cache's order is the result's).
        nodes, n, mean, m2 = self._columns.combined(dirty, start, end)
        std = np.sqrt(m2 / n)  # as Moments.std (combined leaves out the nodes with n <= 0)
        half = _t_quantiles(n, self.confidence) * std / np.sqrt(n)
        rows = zip(n.tolist(), mean.tolist(), std.tolist(), (mean - half).tolist(), (mean + half).tolist(),
                   strict=True)
        made = dict(zip(nodes, rows, strict=True))
        pop, make = cache.pop, NodeStats
        for node in dirty:
            old = pop(node, None)
            if old is not None:
                count -= old.n
            row = made.get(node)
            if row is None:
                continue
            size, average, deviation, low, high = row
            count += size
            cache[node] = (make(node, size, average, deviation, None, None) if size < 2 else
                           make(node, size, average, deviation, low, high))
        self._total = count
        dirty.clear()
        return dict(cache)

    @property
    def mean_count(self) -> float:
        """Mean number of samples per node seen in the window (as of the last ``stats``); 0 if none."""
        return self._total / len(self._cache) if self._cache else 0.0

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able state (every stored contribution and the window end)."""
        return {
            "version": SNAPSHOT_VERSION,
            "end_us": self._end,
            "late_samples": self.late_samples,
            # keys and contributions as the tuples they are (immutable; a JSON array each, as lists were): a new
            # list per contribution set off the cyclic GC, ~8x this snapshot's time on 192k cells
            "cells": [[bucket, node, key, list(signed)]
                      for node, buckets in self._cells.items()
                      for bucket, cell in buckets.items()
                      for key, signed in cell.items()],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the state by one from ``snapshot``; a different version raises ValueError."""
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown NodeWindows snapshot version {state.get('version')!r}")
        self._reset()
        self._end = None if state["end_us"] is None else int(state["end_us"])
        self.late_samples = int(state["late_samples"])
        for bucket, node, key, signed in state["cells"]:
            k: _Key = tuple(key)
            self._cells.setdefault(str(node), {}).setdefault(int(bucket), {})[k] = [
                (int(n), float(mean), float(m2)) for n, mean, m2 in signed]
            self._buckets.setdefault(int(bucket), set()).add(str(node))
            self._where.setdefault(k, set()).add((int(bucket), str(node)))
        parts: dict[_Key, list[tuple[int, str, list[_Signed]]]] = {}
        for node, buckets in self._cells.items():
            for bucket, cell in buckets.items():
                for k, signed in cell.items():
                    parts.setdefault(k, []).append((bucket, node, signed))
        for k, taken in parts.items():
            self._columns.put(k, taken)
        self._dirty = set(self._cells)


def combine(signed: list[_Signed]) -> Moments:
    """The moments of groups of values given as (n, mean, M2) each, a negative n (and M2) for withdrawn ones.

    ``M2 = sum(M2_g + n_g (mean_g - mean)^2)`` holds for any split into groups, withdrawn ones included; with
    exactly rounded sums (``math.fsum``) the result does not depend on the order of the groups, so nothing
    about how summaries arrived can change a bit of it.

    >>> combine([(2, 1.5, 0.5), (1, 4.0, 0.0), (-1, 4.0, -0.0)])
    Moments(n=2, mean=1.5, m2=0.5)
    """
    n, mean, m2 = _combined(signed)
    return EMPTY if n <= 0 else Moments(n, mean, m2)


def _combined(signed: list[_Signed]) -> tuple[int, float, float]:
    """``combine`` as a tuple, n <= 0 when nothing is left (the values of an empty window are not used)."""
    if not signed:
        return 0, 0.0, 0.0
    counts, means, _ = zip(*signed, strict=True)
    n = sum(counts)
    if n <= 0:
        return n, 0.0, 0.0
    exact: Callable[[Iterable[float]], float] = sum if len(signed) <= 2 else math.fsum  # <= 2: the same bits
    mean = exact(map(mul, counts, means)) / n
    m2 = exact([q + c * (m - mean) ** 2 for c, m, q in signed])
    return n, mean, max(m2, 0.0)


def _t_quantiles(n: np.ndarray, confidence: float) -> np.ndarray:
    """``t_quantile`` of each count of two or more (0.0 for the others), one scipy look-up per distinct count."""
    quantiles = np.zeros(len(n))
    some = n >= 2
    counts, which = np.unique(n[some], return_inverse=True)
    quantiles[some] = np.array([t_quantile(k, confidence) for k in counts.tolist()])[which]
    return quantiles


def from_moments(node_id: str, moments: Moments, confidence: float = 0.95) -> NodeStats:
    """A node's window statistics from the moments of its z-values (population std, Student-t interval).

    >>> s = from_moments("n1", Moments.of([0.0, 1.0, 2.0]))
    >>> s == summarize("n1", [0.0, 1.0, 2.0])
    True
    """
    n, mean, std = moments.n, moments.mean, moments.std
    if n < 2:
        return NodeStats(node_id, n, mean, std, None, None)
    half = t_quantile(n, confidence) * std / math.sqrt(n)
    return NodeStats(node_id, n, mean, std, mean - half, mean + half)


def moments_rows(values: dict[tuple[str, int], list[float]]) -> tuple[NodeMoments, ...]:
    """``NodeMoments`` of the values per (node, bucket), in node then bucket order."""
    return tuple(NodeMoments(node, bucket, *moments_of(v)) for (node, bucket), v in sorted(values.items()) if v)
