"""The ranking's rows carried from period to period (``RowCache``) equal rows built afresh, in order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.decision.policy import Verdict
from streams.core.detection.base import Evidence
from streams.core.ranking import NodeRank
from streams.core.rows import RowCache
from streams.core.windows import NodeStats, summarize

# Per period, per node: its level (None: no level), whether it has statistics, and which of its inputs are
# new objects this period (statistics, evidence, verdict); nodes come and go between periods.
node_period = st.tuples(st.one_of(st.none(), st.integers(0, 4)), st.booleans(),
                        st.tuples(st.booleans(), st.booleans(), st.booleans()))
periods = st.lists(st.dictionaries(st.sampled_from([f"n{i:02d}" for i in range(25)]), node_period, max_size=25),
                   min_size=1, max_size=6)


def fresh_rows(stats: dict[str, NodeStats], evidence: dict[str, Evidence],
               verdicts: dict[str, Verdict]) -> list[NodeRank]:
    """What a ranking lists, built from nothing: by level (None last), then node id."""
    rows = [NodeRank(node, stats.get(node), None if (e := evidence.get(node)) is None else e.level, v.eligible,
                     v.blacklisted, v.reason) for node, v in verdicts.items()]
    return sorted(rows, key=lambda r: (r.level is None, r.level or 0, r.node_id))


@settings(max_examples=150, deadline=None)
@given(periods)
def test_carried_rows_equal_rows_built_afresh_every_period(spec: list[dict]) -> None:
    cache = RowCache()
    stats: dict[str, NodeStats] = {}
    evidence: dict[str, Evidence] = {}
    verdicts: dict[str, Verdict] = {}
    rows: tuple[NodeRank, ...] = ()
    for period, nodes in enumerate(spec):
        stats = {n: s for n, s in stats.items() if n in nodes}
        evidence = {n: e for n, e in evidence.items() if n in nodes}
        verdicts = {n: v for n, v in verdicts.items() if n in nodes}
        for node, (level, has_stats, (new_s, new_e, new_v)) in nodes.items():
            if not has_stats:
                stats.pop(node, None)
            elif new_s or node not in stats:
                stats[node] = summarize(node, [float(period), period + 0.5])
            if new_e or node not in evidence or evidence[node].level != level:
                evidence[node] = Evidence(node, level == 0, float(period), f"p{period}", level=level)
            if new_v or node not in verdicts:
                verdicts[node] = Verdict(node, level == 0, level == 0, f"p{period} {node}")
        before = {row.node_id: row for row in rows}
        rows = cache.ordered(stats, evidence, verdicts)
        assert list(rows) == fresh_rows(stats, evidence, verdicts)
        for row in rows:  # a row whose inputs are the same objects is the same row
            old = before.get(row.node_id)
            if old is not None and old.stats is stats.get(row.node_id) and not any(nodes[row.node_id][2]):
                assert row is old or old.level != row.level
