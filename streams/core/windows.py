"""Per-node statistics of z-values over hopping event-time windows (DSB Algorithm 2, ML-NA).

The window ending at ``end`` covers event times ``[end - window_size_us, end)``; ends fall on
multiples of ``step_us`` (hopping windows: size 1 h, step = the ranking period, 5 min, by default).
For each node: n, mean, population std (DSB divides by n) and the Student-t interval
``mean ± t(confidence/2 + 1/2, n-1) · std / √n`` (none for n < 2). ML-NA's task count normalised
against all nodes of the window is ``n / mean_count`` (``mean_count``: the mean n over the nodes seen),
so 1.0 is an average load.

Samples are keyed by (job_id, task_id): a later sample of the same task replaces the earlier one, so
a final z-value replaces its provisional one and a redelivered record does not count twice.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from streams.core.events import NormalizedTask

SNAPSHOT_VERSION = 1

_Key = tuple[str, str]


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
    """Keep each node's recent z-values and summarise the window ending at a given event time.

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
        self.confidence = confidence
        t_quantile(2, confidence)  # scipy's import (most of a second) belongs to set-up, not to the first period
        self._reset()

    def _reset(self) -> None:
        self._total = 0  # sum of n over the cached nodes
        self._samples: dict[str, dict[_Key, tuple[int, float]]] = {}  # node -> key -> (ts, z)
        self._node_of: dict[_Key, str] = {}
        self._expiry: list[tuple[int, str, str]] = []  # (ts, job, task) of every stored sample
        self._pending: list[tuple[int, str, str]] = []  # samples at or after the window end
        self._dirty: set[str] = set()
        self._cache: dict[str, NodeStats] = {}
        self._end: int | None = None
        self.late_samples = 0

    @property
    def window(self) -> tuple[int, int] | None:
        """``(start_us, end_us)`` of the current window, None before the first ``advance``."""
        return None if self._end is None else (self._end - self.window_size_us, self._end)

    @property
    def stored_samples(self) -> int:
        return len(self._node_of)

    def update(self, sample: NormalizedTask) -> None:
        """Add one z-value; a sample older than the current window is counted as late and dropped."""
        window = self.window
        if window is not None and sample.ts_us < window[0]:
            self.late_samples += 1
            return
        key = (sample.job_id, sample.task_id)
        previous = self._node_of.get(key)
        if previous is not None:
            del self._samples[previous][key]
            self._dirty.add(previous)
        self._samples.setdefault(sample.node_id, {})[key] = (sample.ts_us, sample.z)
        self._node_of[key] = sample.node_id
        heapq.heappush(self._expiry, (sample.ts_us, *key))
        if window is None or sample.ts_us >= window[1]:
            heapq.heappush(self._pending, (sample.ts_us, *key))
        else:
            self._dirty.add(sample.node_id)

    def advance(self, now_us: int) -> tuple[int, int]:
        """Move to the window ending at the last step boundary at or before ``now_us``; never back."""
        end = now_us - now_us % self.step_us
        if self._end is not None and end < self._end:
            end = self._end
        self._end = end
        start = end - self.window_size_us
        while self._expiry and self._expiry[0][0] < start:
            ts, job, task = heapq.heappop(self._expiry)
            node = self._current_node(ts, (job, task))
            if node is not None:
                del self._samples[node][(job, task)]
                del self._node_of[(job, task)]
                self._dirty.add(node)
                if not self._samples[node]:
                    del self._samples[node]
        if self._pending and self._pending[0][0] < end:
            self._admit(end)
        return start, end

    def _admit(self, end: int) -> None:
        # One linear pass rather than a pop per sample: before the first window, or after a restore,
        # every stored sample may be pending at once.
        waiting = []
        for ts, job, task in self._pending:
            if ts >= end:
                waiting.append((ts, job, task))
            elif (node := self._node_of.get((job, task))) is not None:
                self._dirty.add(node)
        heapq.heapify(waiting)
        self._pending = waiting

    def stats(self) -> dict[str, NodeStats]:
        """Statistics of every node with at least one sample in the current window."""
        window = self.window
        if window is None:
            return {}
        start, end = window
        for node in self._dirty:
            old = self._cache.pop(node, None)
            self._total -= 0 if old is None else old.n
            values = [z for ts, z in self._samples.get(node, {}).values() if start <= ts < end]
            if values:
                self._cache[node] = summarize(node, values, self.confidence)
                self._total += len(values)
        self._dirty.clear()
        return dict(self._cache)

    @property
    def mean_count(self) -> float:
        """Mean number of samples per node seen in the window (as of the last ``stats``); 0 if none."""
        return self._total / len(self._cache) if self._cache else 0.0

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able state (every stored sample and the window end)."""
        return {
            "version": SNAPSHOT_VERSION,
            "end_us": self._end,
            "late_samples": self.late_samples,
            "samples": [
                [job, task, node, ts, z]
                for node, samples in self._samples.items()
                for (job, task), (ts, z) in samples.items()
            ],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the state by one from ``snapshot``; a different version raises ValueError."""
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown NodeWindows snapshot version {state.get('version')!r}")
        self._reset()
        self._end = None if state["end_us"] is None else int(state["end_us"])
        self.late_samples = int(state["late_samples"])
        for job, task, node, ts, z in state["samples"]:
            key = (str(job), str(task))
            self._samples.setdefault(node, {})[key] = (int(ts), float(z))
            self._node_of[key] = node
            self._expiry.append((int(ts), *key))
            if self._end is None or ts >= self._end:
                self._pending.append((int(ts), *key))
        heapq.heapify(self._expiry)
        heapq.heapify(self._pending)
        self._dirty = set(self._samples)

    def _current_node(self, ts: int, key: _Key) -> str | None:
        """The node still holding ``key`` at time ``ts``, or None when the heap entry is stale."""
        node = self._node_of.get(key)
        if node is None or self._samples[node].get(key, (None, 0.0))[0] != ts:
            return None
        return node
