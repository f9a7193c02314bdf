"""The running-task detector's table of every task it watches (``streams.core.detection.running``): columns of
job, node, start and duration that become numpy arrays in one step per ranking period."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

DROPPED = -2  # a task's duration once it failed or was killed


class TaskTable:
    """Every task seen, as columns (job, node, start, duration; -1 while running, -2 dropped) that become numpy
    arrays in one step each period; rows are in arrival order, so a restored table sums alike."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._index: dict[tuple[str, str], int] = {}
        self._keys: list[tuple[str, str]] = []
        self._jobs: list[int] = []
        self._nodes: list[int] = []
        self._starts: list[int] = []
        self._durations: list[int] = []
        self._job_code: dict[str, int] = {}
        self.node_code: dict[str, int] = {}
        self.node_names: list[str] = []

    def put(self, job: str, task: str, node: str, start: int, duration: int) -> None:
        code = self.node_code.get(node)
        if code is None:
            code = self.node_code[node] = len(self.node_names)
            self.node_names.append(node)
        row = self._index.get((job, task))
        if row is None:
            self._index[(job, task)] = len(self._keys)
            self._keys.append((job, task))
            self._jobs.append(self._job_code.setdefault(job, len(self._job_code)))
            self._nodes.append(code)
            self._starts.append(start)
            self._durations.append(duration)
        else:
            self._nodes[row], self._starts[row], self._durations[row] = code, start, duration

    def drop(self, job: str, task: str) -> None:
        row = self._index.get((job, task))
        if row is not None:
            self._durations[row] = DROPPED

    def has(self, job: str, task: str) -> bool:
        return (job, task) in self._index

    def column(self, values: Mapping[tuple[str, str], int]) -> IntArray:
        """``values`` by row (-1 where a row has none)."""
        if not values:
            return np.full(len(self._keys), -1, dtype=np.int64)
        return np.array([values.get(key, -1) for key in self._keys], dtype=np.int64)

    def arrays(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        return (np.array(self._jobs, dtype=np.int64), np.array(self._nodes, dtype=np.int64),
                np.array(self._starts, dtype=np.int64), np.array(self._durations, dtype=np.int64))

    def compact(self, horizon: int, running_horizon: int) -> bool:
        """Forget finished tasks started before ``horizon`` and running ones started before ``running_horizon``
        (done when a quarter of the rows can go, so it costs little)."""
        starts, durations = np.array(self._starts, dtype=np.int64), np.array(self._durations, dtype=np.int64)
        keep = (starts >= horizon) | ((durations == -1) & (starts >= running_horizon))
        keep &= durations != DROPPED
        if keep.sum() > 0.75 * len(keep):
            return False
        rows = self.rows_where(keep)
        self._clear()
        for job, task, node, start, duration in rows:
            self.put(job, task, node, start, duration)
        return True

    def rows_where(self, keep: npt.NDArray[np.bool_]) -> list[list[Any]]:
        return [[job, task, self.node_names[self._nodes[i]], self._starts[i], self._durations[i]]
                for i, (job, task) in enumerate(self._keys) if keep[i]]

    def rows(self) -> list[list[Any]]:
        return self.rows_where(np.ones(len(self._keys), dtype=bool))
