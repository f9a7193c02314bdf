"""The running-task detector's table of every task it watches (``streams.core.detection.running``): columns of
job, node, start and duration held in growable numpy arrays, so a ranking period reads them without copying a
Python list per column (at a 1-minute ranking period the copies were a third of the detector's time).

>>> table = TaskTable()
>>> table.put("j1", "t1", "n1", 10, -1)
>>> table.put("j1", "t2", "n2", 12, -1)
>>> table.put("j1", "t1", "n1", 10, 30)  # t1 finished: its row is updated in place
>>> [column.tolist() for column in table.arrays()]
[[0, 0], [0, 1], [10, 12], [30, -1]]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

DROPPED = -2  # a task's duration once it failed or was killed
_COLUMNS = 4  # job, node, start, duration


# Pending writes are flushed at this many rows at the latest: each costs ~180 B as a dict entry and a tuple until
# then (a restore of 1 M rows peaked at 378 MB against 200 MB when they waited for the first read; session 27).
_PENDING_MAX = 65_536


class TaskTable:
    """Every task seen, as columns (job, node, start, duration; -1 while running, -2 dropped) in one numpy
    array that grows by doubling; rows are in arrival order, so a restored table sums alike."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self, capacity: int = 1024) -> None:
        self._index: dict[tuple[str, str], int] = {}
        self._keys: list[tuple[str, str]] = []
        self._data: IntArray = np.zeros((_COLUMNS, capacity), dtype=np.int64)
        self._job_code: dict[str, int] = {}
        self.node_code: dict[str, int] = {}
        self.node_names: list[str] = []
        # What ``put`` and ``drop`` wrote since the columns were last read, written at once when they are (``_flush``):
        # a numpy write per event was most of a boundary's ``TaskLog.apply_before`` (session 27).
        self._pending: dict[int, tuple[int, int, int]] = {}  # row -> node code (-1: only the duration), start, duration
        self._new_jobs: list[int] = []  # the job codes of the rows from ``self._flushed`` on
        self._flushed = 0

    def __len__(self) -> int:
        return len(self._keys)

    def put(self, job: str, task: str, node: str, start: int, duration: int) -> None:
        code = self.node_code.get(node)
        if code is None:
            code = self.node_code[node] = len(self.node_names)
            self.node_names.append(node)
        row = self._index.get((job, task))
        if row is None:
            # The key lives as long as the task: one copy of each job id and of each task id (task ids repeat
            # across jobs), not the copies every decoded event carries (issue 18: the index is most of the memory).
            key = (sys.intern(job), sys.intern(task))
            row = self._index[key] = len(self._keys)
            self._keys.append(key)
            self._new_jobs.append(self._job_code.setdefault(key[0], len(self._job_code)))
        self._pending[row] = (code, start, duration)
        if len(self._pending) >= _PENDING_MAX:  # a restore puts every row: a bounded dict, not one the table's size
            self._flush()

    def drop(self, job: str, task: str) -> None:
        row = self._index.get((job, task))
        if row is not None:
            code, start, _ = self._pending.get(row, (-1, 0, 0))
            self._pending[row] = (code, start, DROPPED)

    def _flush(self) -> None:
        """Write the pending rows into the columns, growing them by doubling."""
        n = len(self._keys)
        if n > self._data.shape[1]:
            capacity = self._data.shape[1]
            while capacity < n:
                capacity *= 2
            grown = np.zeros((_COLUMNS, capacity), dtype=np.int64)
            grown[:, :self._flushed] = self._data[:, :self._flushed]
            self._data = grown
        if self._new_jobs:
            self._data[0, self._flushed:n] = self._new_jobs
            self._new_jobs = []
        self._flushed = n
        if self._pending:
            rows = np.fromiter(self._pending, dtype=np.int64, count=len(self._pending))
            values = np.array(list(self._pending.values()), dtype=np.int64)
            self._pending = {}
            whole = values[:, 0] >= 0
            self._data[1, rows[whole]], self._data[2, rows[whole]] = values[whole, 0], values[whole, 1]
            self._data[3, rows] = values[:, 2]

    def key(self, job: str, task: str) -> tuple[str, str]:
        """The table's own ``(job, task)`` key when it has the task (one copy of the strings), else a new one."""
        row = self._index.get((job, task))
        return (job, task) if row is None else self._keys[row]

    def has(self, job: str, task: str) -> bool:
        return (job, task) in self._index

    def column(self, values: Mapping[tuple[str, str], int]) -> IntArray:
        """``values`` by row (-1 where a row has none)."""
        out = np.full(len(self._keys), -1, dtype=np.int64)
        for key, value in values.items():
            row = self._index.get(key)
            if row is not None:
                out[row] = value
        return out

    def arrays(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """Copies of the job, node, start and duration columns."""
        return tuple(column.copy() for column in self.views())  # type: ignore[return-value]

    def views(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """The job, node, start and duration columns themselves (read-only use, until the next ``put``, ``drop`` or
        ``compact``: what those write is seen at the next read, not through views handed out before it): no copy of
        four columns of every task a period (issue 18: the detector's peak memory)."""
        self._flush()
        n = len(self._keys)
        views = self._data[0, :n], self._data[1, :n], self._data[2, :n], self._data[3, :n]
        for view in views:
            view.flags.writeable = False  # a write through a view would change the table itself
        return views

    def compact(self, horizon: int, running_horizon: int) -> bool:
        """Forget finished tasks started before ``horizon`` and running ones started before ``running_horizon``
        (done when a quarter of the rows can go, so it costs little)."""
        self._flush()
        n = len(self._keys)
        starts, durations = self._data[2, :n], self._data[3, :n]
        keep = (starts >= horizon) | ((durations == -1) & (starts >= running_horizon))
        keep &= durations != DROPPED
        if keep.sum() > 0.75 * n:
            return False
        self._keep(np.flatnonzero(keep))
        return True

    def _keep(self, rows: npt.NDArray[np.intp]) -> None:
        """Keep only ``rows``, in their order, jobs and nodes numbered afresh by their first kept row: the table
        ``put`` row by row would build (a loop of puts took 14 s a compaction at 10 k nodes; issue 18, session 18)."""
        jobs_by_code = list(self._job_code)  # codes were given in insertion order
        data = self._data[:, rows]
        job_codes, job_names = _first_seen(data[0], jobs_by_code)
        node_codes, node_names = _first_seen(data[1], self.node_names)
        keys = [self._keys[i] for i in rows.tolist()]
        self._clear(max(1024, 2 * len(keys)))
        self._data[:, :len(keys)] = data
        self._data[0, :len(keys)], self._data[1, :len(keys)] = job_codes, node_codes
        self._keys, self._flushed = keys, len(keys)
        self._index = {key: i for i, key in enumerate(keys)}
        self._job_code = {job: i for i, job in enumerate(job_names)}
        self.node_names = node_names
        self.node_code = {node: i for i, node in enumerate(node_names)}

    def rows_where(self, keep: npt.NDArray[np.bool_]) -> list[list[Any]]:
        self._flush()
        nodes, starts, durations = (self._data[k, :len(self._keys)].tolist() for k in (1, 2, 3))
        return [[job, task, self.node_names[nodes[i]], starts[i], durations[i]]
                for i, (job, task) in enumerate(self._keys) if keep[i]]

    def rows(self) -> list[list[Any]]:
        return self.rows_where(np.ones(len(self._keys), dtype=bool))


def _first_seen(codes: IntArray, names: list[str]) -> tuple[IntArray, list[str]]:
    """``codes`` renumbered 0, 1, ... in the order each first appears, and the names in that order.

    >>> new, order = _first_seen(np.array([5, 2, 5, 0]), ["a", "b", "c", "d", "e", "f"])
    >>> new.tolist(), order
    ([0, 1, 0, 2], ['f', 'c', 'a'])
    """
    unique, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(unique), dtype=np.int64)
    rank[by_first] = np.arange(len(unique))
    return rank[inverse.reshape(-1)], [names[int(c)] for c in unique[by_first]]
