"""A worker's predictor rebuilds the live node view from the published records (node-scores, blacklist
deltas and snapshots) as the in-process runner's ``ClusterView.observe`` holds it, at every boundary: the same
mean z for every node with samples in the window, the same listed nodes. One difference is by design of
node-scores (it carries no record when a node's last sample leaves the window): such a node stays in the
rebuilt view until a whole window passed since its last record."""

from __future__ import annotations

from producers.registry import open_trace
from streams.core.prediction.base import ClusterView
from streams.core.prediction.published import PublishedView
from streams.core.rank_stage import RankResult
from streams.core.ranking import ScoreChanges
from streams.local import LocalPipeline
from streams.settings import Settings

TRACE = "synthetic:nodes=40,slow=3,jobs=150,checkpoints=4,seed=1"


def run(via: str) -> tuple[int, int, int, int]:
    """Boundaries compared; of them, those with a node that left the window, with a node listed, and with a
    node that left the window but is still in the rebuilt view."""
    observed, rebuilt = ClusterView(), ClusterView()
    published = PublishedView(rebuilt, cluster_id="default")
    changes = ScoreChanges()
    counts = [0, 0, 0, 0]
    previous: set[str] = set()
    last_record: dict[str, int] = {}  # node -> window end of its latest record

    def check(result: RankResult) -> None:
        observed.observe(result.ranking)
        for score in changes.select(result.ranking):  # what node-scores carries: the changed ones
            published.take(score)
            last_record[score.node_id] = score.window_end_us
        if result.delta is not None:
            published.take(result.delta if via == "deltas" else result.snapshot)
        assert rebuilt.listed == observed.listed, result.boundary_us
        assert {n: rebuilt.node_mean_z.get(n) for n in observed.node_mean_z} == observed.node_mean_z
        stale = set(rebuilt.node_mean_z) - set(observed.node_mean_z)
        assert all(last_record[n] > result.ranking.window_start_us for n in stale), "gone after one window"
        counts[0] += 1
        counts[1] += bool(previous - set(observed.node_mean_z))
        counts[2] += bool(observed.listed)
        counts[3] += bool(stale)
        previous.clear()
        previous.update(observed.node_mean_z)

    pipeline = LocalPipeline(Settings(window_size_s=240.0, ranking_period_s=60.0), on_ranking=check)
    for _ in pipeline.run(open_trace(TRACE)):
        pass
    return counts[0], counts[1], counts[2], counts[3]


def test_the_view_from_node_scores_and_snapshots_is_the_rankings_at_every_boundary() -> None:
    compared, dropped, listed, stale = run("snapshots")
    assert compared > 40 and dropped > 0 and listed > 0  # nodes left the window and nodes were listed
    assert stale <= dropped


def test_the_view_from_node_scores_and_deltas_is_the_rankings_at_every_boundary() -> None:
    compared, dropped, listed, _ = run("deltas")
    assert compared > 40 and dropped > 0 and listed > 0
