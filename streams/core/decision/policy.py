"""The decision layer: evidence of any detector in, the blacklist of one window out (SPEC 3).

The guards live here and hold whatever the detector: the allow-list (never listed) and the deny-list
(always); the cap, ``floor(max_fraction · nodes seen)`` places, deny-listed nodes included (unless the
deny-list alone is longer), where a node is seen when it has samples in the window or, for a detector that
judges recent nodes only (running), when the detector judged it (``nodes_seen``, counted by the ranker: the policy
never asks which detector produced the evidence); dwell, a listed node stays ``min_dwell_periods`` full periods
after the period it was added in, the allow-list and the cap permitting; release, a node leaves when it no longer
qualifies, with the reason in words, but never while its detector says it is still slow (``Evidence.still_slow``: a
slower node pushing it off P-Cores level 0, or a test that has not yet seen it recover, is no reason to let it
go); stability, a listed node that is still a suspect or still slow keeps its place before any new suspect
takes one, so under the cap the choice does not rotate from period to period (issue 21: 113-120 flaps a run
when 20 % of nodes were slow). When more suspects exist than places, the policy's selection rule
(``streams.core.decision.selection``) chooses. The policy never asks which detector produced the evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streams.core.decision.selection import Candidate, Draw, Selection, highest
from streams.core.detection.base import Evidence, WindowView
from streams.core.ranking_config import RankingConfig
from streams.core.windows import NodeStats

NO_EVIDENCE = "not a suspect: the detector has no evidence against it"
BY_SCORE = highest("score")


def nodes_seen(stats: Mapping[str, NodeStats], evidence: Mapping[str, Evidence], judged_count: bool) -> int:
    """The nodes the cap is a fraction of: those with samples in the window, and with ``judged_count`` (a detector
    whose judged nodes are recent ones, ``base.judges_recent_nodes``) those the detector judged.

    The running detector looks further back than the window (its longest scale, 180 min). In a closed loop the
    difference matters: a node released after an hour on the list got no task while listed, so it has no sample in
    the window until its new tasks finish, yet it is a node of the cluster. Counting the window alone shrank the cap
    for a period (100 -> 97 nodes, 10 -> 9 places) and evicted a slow node that was listed again a period later
    (issue 21, over-cap-2x, closed loop, seed 33)."""
    return len(stats.keys() | evidence.keys()) if judged_count else len(stats)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether one node is (to be) on the blacklist, and why in words."""

    node_id: str
    eligible: bool
    blacklisted: bool
    reason: str


class BlacklistPolicy:
    """Decide the blacklist of one window from the detector's evidence.

    >>> from streams.core.windows import summarize
    >>> view = WindowView(0, 3_600_000_000, {"a": summarize("a", [1.0, 1.2, 1.1, 1.3, 1.2])})
    >>> evidence = {"a": Evidence("a", True, 1.05, "clearly slow"), "b": Evidence("b", False, 0.0, "fast")}
    >>> verdicts = BlacklistPolicy(RankingConfig(max_fraction=1.0)).judge(view, evidence, listed={})
    >>> verdicts["a"].blacklisted, verdicts["a"].reason, verdicts["b"].blacklisted, verdicts["b"].reason
    (True, 'clearly slow', False, 'fast')
    """

    def __init__(self, config: RankingConfig, select: Selection = BY_SCORE) -> None:
        self.config = config
        self.select = select
        self._plain_verdicts: dict[str, Verdict] = {}

    def judge(self, window: WindowView, evidence: Mapping[str, Evidence],
              listed: Mapping[str, int], seen: int | None = None) -> dict[str, Verdict]:
        """Verdicts for every node in the window, with evidence, on the deny-list or ``listed``
        (node -> window end at which it was added). ``seen``: the nodes the cap is a fraction of (``nodes_seen``),
        the window's nodes when None."""
        config = self.config
        stats = window.stats
        why_not = self._why_not(stats.keys(), evidence)
        forced = set(config.deny_list)
        cap = config.cap(len(stats) if seen is None else seen)
        dwelling = self._within(self._dwelling(listed, window.end_us, forced), max(0, cap - len(forced)), evidence)
        holding = self._within(self._holding(listed, evidence, forced | dwelling),
                               max(0, cap - len(forced) - len(dwelling)), evidence)
        candidates = sorted(node for node, why in why_not.items() if why is None)  # a few: not every node sorted
        fresh = [Candidate(evidence[node], stats.get(node)) for node in candidates
                 if node not in forced and node not in dwelling and node not in holding]
        places = max(0, cap - len(forced) - len(dwelling) - len(holding))
        chosen, note = self._choose(fresh, places, Draw(frozenset(listed), config.seed, window.end_us))
        special = forced | dwelling | holding | chosen | set(listed)
        verdicts = self._plain(why_not, special)
        for node in sorted(special | (why_not.keys() - verdicts.keys())):
            verdicts[node] = self._verdict(node, evidence.get(node), why_not.get(node),
                                           (forced, dwelling, holding, chosen), note, listed, window)
        return verdicts

    def _plain(self, why_not: Mapping[str, str | None], special: set[str]) -> dict[str, Verdict]:
        """Most nodes of a large cluster are simply not suspects: their verdict is the reason why not, the same
        verdict as last period when the reason is the same (a cache, not state: rebuilt equal when empty)."""
        old, verdicts = self._plain_verdicts, {}
        for node, reason in why_not.items():
            if reason is None or node in special:
                continue
            v = old.get(node)
            if v is None or v.reason != reason or v.eligible or v.blacklisted:  # (judge adds special verdicts)
                v = Verdict(node, False, False, reason)
            verdicts[node] = v
        self._plain_verdicts = verdicts
        return verdicts

    def _why_not(self, nodes: Iterable[str], evidence: Mapping[str, Evidence]) -> dict[str, str | None]:
        """Why each node of the window or the evidence is not a candidate; None for candidates."""
        allow = self.config.allow_list
        # One pass over thousands of nodes every period: plain loops, no call per node.
        why_not: dict[str, str | None] = {
            node: "on the allow-list" if node in allow else None if e.suspect else e.reason
            for node, e in evidence.items()
        }
        for node in nodes:
            if node not in why_not:
                why_not[node] = "on the allow-list" if node in allow else NO_EVIDENCE
        return why_not

    def _dwelling(self, listed: Mapping[str, int], end_us: int, forced: set[str]) -> set[str]:
        # Added at boundary B, a node is listed through the period starting at B; it stays min_dwell_periods
        # full periods after that one, so its first possible release is B + (min_dwell_periods + 1) periods.
        return {node for node, added in listed.items()
                if end_us - added <= self.config.min_dwell_us and node not in self.config.allow_list | forced}

    def _holding(self, listed: Mapping[str, int], evidence: Mapping[str, Evidence], taken: set[str]) -> set[str]:
        # Listed nodes the detector still holds slow (suspect or not) keep their places: release only on recovery.
        return {node for node in listed if node not in taken and node not in self.config.allow_list
                and (e := evidence.get(node)) is not None and (e.suspect or e.still_slow)}

    def _within(self, dwelling: set[str], places: int, evidence: Mapping[str, Evidence]) -> set[str]:
        # Dwell yields to the cap (the window may have shrunk): keep the highest scores.
        if len(dwelling) <= places:
            return dwelling
        ranked = sorted(dwelling, key=lambda v: (-_score(evidence.get(v)), v))
        return set(ranked[:places])

    def _choose(self, fresh: list[Candidate], places: int, draw: Draw) -> tuple[set[str], str]:
        if len(fresh) <= places:
            return {c.node_id for c in fresh}, ""
        return self.select(fresh, places, draw)

    def _verdict(self, node: str, evidence: Evidence | None, why_not: str | None,
                 groups: tuple[set[str], set[str], set[str], set[str]], note: str, listed: Mapping[str, int],
                 window: WindowView) -> Verdict:
        forced, dwelling, holding, chosen = groups
        eligible = evidence is not None and why_not is None
        if node in forced:
            return Verdict(node, eligible, True, "on the deny-list")
        if node in dwelling:
            periods = self.config.min_dwell_periods
            reason = f"held: min_dwell ({periods} full periods after the one it was added in) not over"
            return Verdict(node, eligible, True, reason)
        if node in holding:
            assert evidence is not None
            return Verdict(node, eligible, True, _held(evidence, window.stats.get(node)))
        if node in chosen:
            assert evidence is not None
            return Verdict(node, True, True, evidence.reason + (f"; {note}" if note else ""))
        if evidence is None and node not in window.stats:
            return Verdict(node, False, False,
                           f"no recent evidence: no samples in the window [{window.start_us}, {window.end_us}) us")
        if why_not is not None:
            reason = why_not if node not in listed else f"no longer qualifies: {why_not}"
            return Verdict(node, False, False, reason)
        return Verdict(node, True, False, f"over the cap: not among the {note or 'chosen nodes'}")


def _score(evidence: Evidence | None) -> float:
    return float("-inf") if evidence is None else evidence.score


def _held(evidence: Evidence, stats: NodeStats | None) -> str:
    """Why a listed node stays: its detector's words, with its interval when it has one."""
    if evidence.suspect:
        return evidence.reason
    interval = ""
    if stats is not None and stats.ci_low is not None and stats.ci_high is not None:
        interval = f" (n={stats.n}, interval [{stats.ci_low:+.2f}, {stats.ci_high:+.2f}])"
    return f"held: still slow{interval}; {evidence.reason}"
