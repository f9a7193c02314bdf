"""Blacklist policies on top of P-Cores levels: ``pcores`` and ``pcores-top-k`` (SPEC 3, DSB 4.2.3-4.2.4).

A node is *eligible* when it is not on the allow-list, has at least ``min_tasks`` samples in the
window, sits on level 0, some edge exists at all (not every interval overlaps), and its interval is
clearly above the ``significance_floor`` (``ci_low > floor``; None disables the floor). Deny-listed
nodes are always on the blacklist.

The blacklist never holds more than ``cap = floor(max_fraction · nodes seen)`` nodes, deny-listed
ones included (unless the deny-list alone is longer). When more eligible nodes exist than places:
``pcores-top-k`` takes DSB's intersection of the top-k by std and by mean, and fills the remaining
places by a seeded draw among the nodes at the boundary of the two lists, preferring nodes already
listed so that the list does not flap; ``pcores`` keeps the nodes with the highest ``ci_low`` (the
most clearly slow). A listed node stays at least ``min_dwell_periods`` periods, the allow-list
and the cap permitting, and every verdict carries its reason in words.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from streams.core.pcores import has_edges
from streams.core.ranking_config import RankingConfig
from streams.core.windows import NodeStats


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether one node is (to be) on the blacklist, and why in words."""

    node_id: str
    eligible: bool
    blacklisted: bool
    reason: str


class BlacklistPolicy:
    """Decide the blacklist of one window from node statistics and P-Cores levels.

    >>> from streams.core.windows import summarize
    >>> stats = {"a": summarize("a", [1.0, 1.2, 1.1, 1.3, 1.2]),
    ...          "b": summarize("b", [0.0, 0.1, -0.1, 0.05, 0.0])}
    >>> policy = BlacklistPolicy(RankingConfig(max_fraction=0.5))
    >>> verdicts = policy.judge(stats, {"a": 0, "b": 1}, listed={}, window=(0, 3_600_000_000))
    >>> verdicts["a"].blacklisted, verdicts["b"].blacklisted
    (True, False)
    >>> verdicts["b"].reason
    'not level 0 (level 1 of 2)'
    """

    def __init__(self, config: RankingConfig) -> None:
        self.config = config

    def judge(
        self,
        stats: Mapping[str, NodeStats],
        levels: Mapping[str, int],
        listed: Mapping[str, int],
        window: tuple[int, int],
    ) -> dict[str, Verdict]:
        """Verdicts for every node in ``stats``, on the deny-list or ``listed`` (node -> time added)."""
        config = self.config
        edges = has_edges(levels)
        depth = 1 + max(levels.values(), default=-1)
        why_not = {node: self._ineligible(s, levels.get(node), edges, depth) for node, s in stats.items()}
        forced = set(config.deny_list)
        dwelling = {
            node for node, added in listed.items()
            if window[1] - added < config.min_dwell_us and node not in config.allow_list | forced
        }
        cap = config.cap(len(stats))
        dwelling = self._within(dwelling, max(0, cap - len(forced)), stats)
        candidates = sorted(node for node, reason in why_not.items() if reason is None and node not in forced)
        fresh = [node for node in candidates if node not in dwelling]
        places = max(0, cap - len(forced) - len(dwelling))
        chosen, note = self._select([stats[node] for node in fresh], places, set(listed), window[1])
        special = forced | dwelling | chosen | set(listed)
        # Most nodes of a large cluster are simply not eligible: their verdict is the reason why not.
        verdicts = {
            node: Verdict(node, False, False, reason)
            for node, reason in why_not.items()
            if reason is not None and node not in special
        }
        for node in sorted(special | (set(stats) - set(verdicts))):
            verdicts[node] = self._verdict(node, stats.get(node), why_not.get(node), forced, dwelling,
                                           chosen, note, listed, window, depth)
        return verdicts

    # --- eligibility and selection ------------------------------------------------------------

    def _ineligible(self, s: NodeStats, level: int | None, edges: bool, depth: int) -> str | None:
        config = self.config
        if s.node_id in config.allow_list:
            return "on the allow-list"
        if s.n < config.min_tasks:
            return f"too few samples: n={s.n} < min_tasks {config.min_tasks}"
        if s.ci_low is None or level is None:
            return f"no interval: n={s.n}"
        if not edges:
            return "all intervals overlap: no node is clearly slower than another"
        if level > 0:
            return f"not level 0 (level {level} of {depth})"
        floor = config.significance_floor
        if floor is not None and s.ci_low <= floor:
            return f"not clearly slow: ci_low {s.ci_low:+.3f} <= significance floor {floor:g}"
        return None

    def _within(self, dwelling: set[str], places: int, stats: Mapping[str, NodeStats]) -> set[str]:
        # Dwell yields to the cap (the window may have shrunk): keep the most clearly slow.
        if len(dwelling) <= places:
            return dwelling
        ranked = sorted(dwelling, key=lambda v: (-_ci_low(stats.get(v)), v))
        return set(ranked[:places])

    def _select(
        self, fresh: list[NodeStats], places: int, listed: set[str], end_us: int
    ) -> tuple[set[str], str]:
        if len(fresh) <= places:
            return {s.node_id for s in fresh}, ""
        if self.config.policy == "pcores":
            ranked = sorted(fresh, key=lambda s: (-_ci_low(s), -s.mean, s.node_id))
            return {s.node_id for s in ranked[:places]}, (
                f"{places} with the highest ci_low of {len(fresh)} eligible nodes (cap)"
            )
        rng = random.Random(f"{self.config.seed}:{end_us}")
        chosen, drawn = top_k_by_std_and_mean(fresh, places, rng, prefer=listed)
        note = f"top {places} of {len(fresh)} eligible nodes by std and mean (DSB with number)"
        if drawn:
            note += f"; boundary drawn with seed {self.config.seed}"
        return chosen, note

    def _verdict(self, node: str, s: NodeStats | None, why_not: str | None, forced: set[str],
                 dwelling: set[str], chosen: set[str], note: str, listed: Mapping[str, int],
                 window: tuple[int, int], depth: int) -> Verdict:
        eligible = s is not None and why_not is None
        if node in forced:
            return Verdict(node, eligible, True, "on the deny-list")
        if node in dwelling:
            reason = f"held: listed less than min_dwell ({self.config.min_dwell_periods} periods) ago"
            return Verdict(node, eligible, True, reason)
        if node in chosen:
            assert s is not None
            return Verdict(node, True, True, _why_slow(s, depth, self.config, note))
        if s is None:
            return Verdict(node, False, False,
                           f"no recent evidence: no samples in the window [{window[0]}, {window[1]}) us")
        if why_not is not None:
            reason = why_not if node not in listed else f"no longer qualifies: {why_not}"
            return Verdict(node, False, False, reason)
        return Verdict(node, True, False, f"over the cap: not among the {note or 'chosen nodes'}")


def top_k_by_std_and_mean(
    nodes: list[NodeStats], k: int, rng: random.Random, prefer: set[str] | frozenset[str] = frozenset()
) -> tuple[set[str], bool]:
    """DSB's "P-Cores with number": the intersection of the top-k by std and by mean, then a draw.

    A node enters the intersection of the two top-d lists at depth ``max(rank by std, rank by mean)``.
    Nodes entering before the depth where the intersection reaches k are taken; the rest come from the
    nodes entering at that depth (the boundary), those in ``prefer`` first, then by ``rng``. Returns the
    chosen node ids and whether a draw decided.

    >>> from streams.core.windows import NodeStats
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


def _ci_low(s: NodeStats | None) -> float:
    return float("-inf") if s is None or s.ci_low is None else s.ci_low


def _why_slow(s: NodeStats, depth: int, config: RankingConfig, note: str) -> str:
    assert s.ci_low is not None and s.ci_high is not None
    floor = config.significance_floor
    reason = (
        f"level 0 of {depth} (nothing clearly slower): its {s.n} tasks ran {s.mean:+.2f} job standard "
        f"deviations from their jobs' means on average (std {s.std:.2f}), {config.confidence:.0%} "
        f"interval [{s.ci_low:+.2f}, {s.ci_high:+.2f}]"
    )
    if floor is not None:
        reason += f" clearly above the significance floor {floor:g}"
    return reason + (f"; {note}" if note else "")
