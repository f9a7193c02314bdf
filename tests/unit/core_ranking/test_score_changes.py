"""``ScoreChanges`` publishes a node's score exactly when its statistics differ from the last ones published,
whether the window hands it the same statistics object again, an equal new one, or changed values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import NodeScore
from streams.core.ranking import NodeRank, Ranking, ScoreChanges
from streams.core.windows import NodeStats

NODES = ("n1", "n2", "n3", "n4")
# per period and node: absent, the previous object again, an equal copy of it, or new values (from a small set,
# so values also come back equal after changing)
steps = st.lists(st.lists(st.sampled_from(["absent", "same", "copy", "new"]), min_size=4, max_size=4),
                 min_size=1, max_size=12)
values = st.sampled_from([(1, 0.5, 0.0, None, None), (3, 0.5, 0.1, 0.2, 0.8), (3, 0.5, 0.1, 0.2, 0.9)])


def reference(rankings: list[Ranking]) -> list[list[NodeScore]]:
    """The selection as it was written first: every node's score built, kept when its values changed."""
    last: dict[str, tuple[object, ...]] = {}
    out = []
    for ranking in rankings:
        changed = []
        for score in ranking.node_scores():
            key = (score.n, score.mean, score.std, score.ci_low, score.ci_high)
            if last.get(score.node_id) != key:
                last[score.node_id] = key
                changed.append(score)
        out.append(changed)
    return out


@settings(max_examples=300, deadline=None)
@given(steps, st.data())
def test_the_same_scores_as_comparing_every_node(plan: list[list[str]], data: st.DataObject) -> None:
    current: dict[str, NodeStats] = {}
    rankings = []
    for period, kinds in enumerate(plan):
        rows = []
        for node, kind in zip(NODES, kinds, strict=True):
            previous = current.get(node)
            if kind == "absent":
                rows.append(NodeRank(node, None, None, False, False, "absent"))
                continue
            if kind == "new" or previous is None:
                current[node] = NodeStats(node, *data.draw(values))
            elif kind == "copy":
                current[node] = NodeStats(node, previous.n, previous.mean, previous.std, previous.ci_low,
                                          previous.ci_high)
            rows.append(NodeRank(node, current[node], 0, True, False, ""))
        rankings.append(Ranking(period * 10, period * 10 + 100, "pcores", tuple(rows), cap=0,
                                mean_count=float(period % 3)))
    changes = ScoreChanges()
    assert [changes.select(ranking) for ranking in rankings] == reference(rankings)
