"""Record each ranking of a run (who was listed, every node's statistics) for the plots over time."""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.core.stages import RankResult


@dataclass(frozen=True, slots=True)
class NodePoint:
    """One node's window statistics at one ranking boundary."""

    n: int
    mean: float
    ci_low: float | None
    ci_high: float | None
    level: int | None


@dataclass(frozen=True, slots=True)
class RankingPoint:
    """One ranking boundary: the blacklist after it and every node's statistics in its window."""

    boundary_us: int
    blacklist: frozenset[str]
    nodes: dict[str, NodePoint]


@dataclass
class RunHistory:
    """A ``LocalPipeline`` ``on_ranking`` callback keeping every ranking; also keeps the last full result.

    Meant for runs of a few thousand rankings over tens to hundreds of nodes (the demo), not a whole
    production trace.
    """

    points: list[RankingPoint] = field(default_factory=list)

    def __call__(self, result: RankResult) -> None:
        nodes = {
            row.node_id: NodePoint(row.stats.n, row.stats.mean, row.stats.ci_low, row.stats.ci_high, row.level)
            for row in result.ranking.nodes
            if row.stats is not None
        }
        self.points.append(RankingPoint(result.boundary_us, result.snapshot.node_ids, nodes))

    def series(self, node_id: str, attribute: str) -> tuple[list[int], list[float]]:
        """Boundaries and values of one statistic of one node, where it had a value."""
        times, values = [], []
        for point in self.points:
            node = point.nodes.get(node_id)
            value = None if node is None else getattr(node, attribute)
            if value is not None:
                times.append(point.boundary_us)
                values.append(float(value))
        return times, values

    def node_ids(self) -> list[str]:
        return sorted({node for point in self.points for node in point.nodes})
