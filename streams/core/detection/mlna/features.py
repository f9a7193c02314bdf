"""ML-NA's features (paper section III-A, SPEC 6): per node and sub-period, cumulated from the period's start.

A period ("month" in the paper) holds ``sub_periods`` sub-periods ("days"). For node m and sub-period k the
features are the mean and the population standard deviation of the z-values of m's tasks in sub-periods
1..k, and m's task count in 1..k divided by the mean count of all nodes of the period in 1..k (the "timing
attributes": day k's statistics cover days 1..k). A period's vector is ``3 * sub_periods`` long, laid out
``[mean_1, std_1, count_1, mean_2, ...]``.

A node with no task yet in sub-periods 1..k gets the explicit missing marker ``MISSING`` for k: mean 0 (the
job average, neither fast nor slow), std 0 and count 0. The paper's features were NaN there, and its seventh
month, whose first three days had no task at all, is where its accuracy broke down; a count of exactly 0
says "no evidence" in a form a classifier and k-means can use. A period with no task at all in 1..k gives
every node the marker (the mean count is then 0).

>>> builder = PeriodBuilder(start_us=0, sub_period_us=10, sub_periods=2)
>>> for node, ts, z in [("a", 1, 1.0), ("a", 2, 3.0), ("b", 5, -1.0), ("b", 12, 1.0), ("c", 15, 0.0)]:
...     _ = builder.add(node, ts, z)
>>> table = builder.table()
>>> table.nodes
('a', 'b', 'c')
>>> [round(v, 3) for v in table.row("a")]  # day 1: mean 2, std 1, 2 tasks / mean 1; day 2: same / mean 5/3
[2.0, 1.0, 2.0, 2.0, 1.0, 1.2]
>>> table.row("c")[:3] == list(MISSING)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

MISSING = (0.0, 0.0, 0.0)  # (mean z, std z, normalised count) of a node with no task so far in the period
FEATURES_PER_SUB_PERIOD = 3


@dataclass(slots=True)
class Moments:
    """Count, sum and sum of squares of z-values: enough for a mean and a population std, and mergeable."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, z: float) -> None:
        self.n += 1
        self.total += z
        self.squares += z * z

    def merge(self, other: Moments) -> None:
        self.n += other.n
        self.total += other.total
        self.squares += other.squares

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def std(self) -> float:
        if not self.n:
            return 0.0
        return math.sqrt(max(0.0, self.squares / self.n - self.mean**2))


@dataclass(frozen=True, slots=True)
class FeatureTable:
    """One period's feature vectors: ``values[i]`` belongs to ``nodes[i]``; ``counts[i]`` is the node's tasks."""

    start_us: int
    sub_period_us: int
    sub_periods: int
    nodes: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]
    counts: tuple[int, ...]

    @property
    def end_us(self) -> int:
        return self.start_us + self.sub_period_us * self.sub_periods

    def row(self, node: str) -> list[float]:
        return list(self.values[self.nodes.index(node)])

    def daily_means(self, row: Sequence[float]) -> list[float]:
        """The cumulative mean z of each sub-period from one vector (or one k-means centre)."""
        return [row[i * FEATURES_PER_SUB_PERIOD] for i in range(self.sub_periods)]


@dataclass
class PeriodBuilder:
    """Collects the z-values of one period, by node and sub-period, and builds its ``FeatureTable``."""

    start_us: int
    sub_period_us: int
    sub_periods: int
    _cells: dict[str, list[Moments]] = field(default_factory=dict)

    @property
    def end_us(self) -> int:
        return self.start_us + self.sub_period_us * self.sub_periods

    def sub_period_of(self, ts_us: int) -> int | None:
        """Index of the sub-period holding ``ts_us``, None when outside the period."""
        if not self.start_us <= ts_us < self.end_us:
            return None
        return (ts_us - self.start_us) // self.sub_period_us

    def add(self, node_id: str, ts_us: int, z: float) -> bool:
        """Count one task's z-value; False (ignored) when ``ts_us`` falls outside the period."""
        index = self.sub_period_of(ts_us)
        if index is None or not math.isfinite(z):
            return False
        cells = self._cells.get(node_id)
        if cells is None:
            cells = self._cells[node_id] = [Moments() for _ in range(self.sub_periods)]
        cells[index].add(z)
        return True

    def cells(self) -> dict[str, list[tuple[int, float, float]]]:
        """The raw state as plain data (for snapshots)."""
        return {node: [(m.n, m.total, m.squares) for m in cells] for node, cells in self._cells.items()}

    def restore_cells(self, cells: dict[str, list[tuple[int, float, float]]]) -> None:
        self._cells = {node: [Moments(int(n), float(t), float(s)) for n, t, s in rows] for node, rows in cells.items()}

    def table(self) -> FeatureTable:
        """Cumulative features of every node with at least one task in the period, nodes in name order."""
        nodes = tuple(sorted(self._cells))
        running = {node: Moments() for node in nodes}
        columns: list[list[float]] = [[] for _ in nodes]
        for k in range(self.sub_periods):
            for node in nodes:
                running[node].merge(self._cells[node][k])
            mean_count = sum(m.n for m in running.values()) / len(nodes) if nodes else 0.0
            for i, node in enumerate(nodes):
                moments = running[node]
                if moments.n == 0 or mean_count == 0:
                    columns[i].extend(MISSING)
                else:
                    columns[i].extend((moments.mean, moments.std, moments.n / mean_count))
        counts = tuple(running[node].n for node in nodes)
        return FeatureTable(self.start_us, self.sub_period_us, self.sub_periods, nodes,
                            tuple(tuple(c) for c in columns), counts)  # fmt: skip
