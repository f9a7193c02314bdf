"""Selection rules: which suspects take the places the cap leaves (SPEC 3, DSB 4.2.4).

A rule is called only when there are more suspects than places. It sees each suspect's ``Evidence`` and
window statistics, never which detector spoke, and returns the chosen node ids and a note in words that
travels with the chosen nodes' reasons (and with the others' "over the cap" reasons).

* ``highest(score_name)``: the highest scores (ties: the higher window mean, then the node id).
* ``top_k_by_std_and_mean``: DSB's "P-Cores with number", the intersection of the top-k by std and by
  mean, the boundary drawn with a seed, nodes already listed first so the list does not flap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streams.core.detection.base import Evidence
from streams.core.windows import NodeStats


@dataclass(frozen=True, slots=True)
class Candidate:
    """One suspect: what its detector said and its window statistics (None when it has no sample)."""

    evidence: Evidence
    stats: NodeStats | None

    @property
    def node_id(self) -> str:
        return self.evidence.node_id


@dataclass(frozen=True, slots=True)
class Draw:
    """What a rule may use beyond the candidates: the nodes listed now (to prefer them) and a seeded draw."""

    listed: frozenset[str]
    seed: int
    end_us: int

    def rng(self) -> random.Random:
        """The same draw for the same seed and window, whatever ran before."""
        return random.Random(f"{self.seed}:{self.end_us}")


Selection = Callable[[Sequence[Candidate], int, Draw], tuple[set[str], str]]


def highest(score_name: str) -> Selection:
    """The rule "the ``places`` highest scores", its note naming the score.

    >>> from streams.core.windows import summarize
    >>> c = [Candidate(Evidence(n, True, score, "slow"), summarize(n, [1.0, 2.0]))
    ...      for n, score in (("a", 0.5), ("b", 0.9), ("c", 0.7))]
    >>> chosen, note = highest("ci_low")(c, 2, Draw(frozenset(), 0, 0))
    >>> sorted(chosen), note
    (['b', 'c'], '2 with the highest ci_low of 3 eligible nodes (cap)')
    """

    def select(candidates: Sequence[Candidate], places: int, draw: Draw) -> tuple[set[str], str]:
        ranked = sorted(candidates, key=lambda c: (-c.evidence.score, -_mean(c), c.node_id))
        return {c.node_id for c in ranked[:places]}, (
            f"{places} with the highest {score_name} of {len(candidates)} eligible nodes (cap)"
        )

    return select


def top_k_by_std_and_mean_rule(candidates: Sequence[Candidate], places: int, draw: Draw) -> tuple[set[str], str]:
    """DSB with number over the suspects' window statistics (a suspect with none ranks last)."""
    nodes = [c.stats if c.stats is not None else NodeStats(c.node_id, 0, -_INF, -_INF, None, None)
             for c in candidates]
    chosen, drawn = top_k_by_std_and_mean(nodes, places, draw.rng(), prefer=draw.listed)
    note = f"top {places} of {len(candidates)} eligible nodes by std and mean (DSB with number)"
    if drawn:
        note += f"; boundary drawn with seed {draw.seed}"
    return chosen, note


def top_k_by_std_and_mean(
    nodes: list[NodeStats], k: int, rng: random.Random, prefer: set[str] | frozenset[str] = frozenset()
) -> tuple[set[str], bool]:
    """DSB's "P-Cores with number": the intersection of the top-k by std and by mean, then a draw.

    A node enters the intersection of the two top-d lists at depth ``max(rank by std, rank by mean)``.
    Nodes entering before the depth where the intersection reaches k are taken; the rest come from the
    nodes entering at that depth (the boundary), those in ``prefer`` first, then by ``rng``. Returns the
    chosen node ids and whether a draw decided.

    >>> nodes = [NodeStats(f"M{i}", 10, 10.0 - i, 10.0 - i, 0.0, 1.0) for i in range(1, 11)]
    >>> nodes[5] = NodeStats("M6", 10, 4.0, 4.0, 0.0, 1.0)  # 6th by std, 7th by mean
    >>> nodes[6] = NodeStats("M7", 10, 4.5, 3.0, 0.0, 1.0)  # 7th by std, 6th by mean
    >>> chosen, drawn = top_k_by_std_and_mean(nodes, 6, random.Random(0))
    >>> sorted(chosen - {"M6", "M7"}), len(chosen & {"M6", "M7"}), drawn
    (['M1', 'M2', 'M3', 'M4', 'M5'], 1, True)
    """
    if k <= 0:
        return set(), False
    if len(nodes) <= k:
        return {s.node_id for s in nodes}, False
    by_std = sorted(nodes, key=lambda s: (-s.std, s.node_id))
    by_mean = sorted(nodes, key=lambda s: (-s.mean, s.node_id))
    rank_std = {s.node_id: i for i, s in enumerate(by_std)}
    rank_mean = {s.node_id: i for i, s in enumerate(by_mean)}
    entry = sorted((max(rank_std[s.node_id], rank_mean[s.node_id]), s.node_id) for s in nodes)
    boundary_depth = entry[k - 1][0]
    taken = {node for depth, node in entry if depth < boundary_depth}
    boundary = [node for depth, node in entry if depth == boundary_depth]
    places = k - len(taken)
    if len(boundary) == places:
        return taken | set(boundary), False
    preferred = [node for node in boundary if node in prefer][:places]
    rest = [node for node in boundary if node not in prefer]
    drawn = rng.sample(rest, places - len(preferred))
    return taken | set(preferred) | set(drawn), bool(drawn)


_INF = float("inf")


def _mean(candidate: Candidate) -> float:
    return -_INF if candidate.stats is None else candidate.stats.mean
