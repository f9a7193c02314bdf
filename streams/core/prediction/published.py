"""The live node view of a worker's predictor, from what the ranking publishes.

In-process the runner hands each ``Ranking`` to ``ClusterView.observe``; a worker that predicts holds no
ranking (the ranking runs on one worker of the statistics group), so it rebuilds the same view from the
records the ranking publishes: ``node-scores`` (each node's window statistics, sent only when they changed,
``streams.core.ranking.ScoreChanges``) and ``blacklist-snapshot`` / ``blacklist-deltas`` (the listed nodes).

A node's score record stays current until the next one: its statistics did not change. One thing
node-scores does not carry is a node's last sample leaving the window (no statistics, no record): once a
full window has passed since its last record (the record's window ends at or before the start of the
newest window seen), every sample it counted has left and none came since, and the view drops the node, as
``observe`` does; until then it keeps the node's last mean z (at most one window longer than ``observe``;
tests/unit/prediction_value/test_published_view.py holds the two views together at every boundary). Records
older than what the view holds (a restarted ranking republishing) are ignored, as are other clusters'
blacklists.

>>> from streams.core.events import NodeScore
>>> view = ClusterView()
>>> published = PublishedView(view, cluster_id="c")
>>> published.take(NodeScore("slow", 0, 60, 9, 1.8, 0.4, 1.5, 2.1, 1.0))
>>> published.take(NodeScore("ok", 0, 60, 9, 0.1, 0.4, -0.2, 0.4, 1.0))
>>> published.take(NodeScore("ok", 10, 70, 10, 0.0, 0.4, -0.2, 0.3, 1.0))  # only "ok" changed at 70
>>> view.node_mean_z
{'slow': 1.8, 'ok': 0.0}
>>> published.take(NodeScore("ok", 60, 120, 4, 0.2, 0.4, -0.2, 0.5, 1.0))  # "slow" unchanged for a window
>>> view.node_mean_z
{'ok': 0.2}
"""

from __future__ import annotations

from streams.core.events import BlacklistDelta, BlacklistSnapshot, NodeScore
from streams.core.prediction.base import ClusterView


class PublishedView:
    """Applies published ranking records to ``view`` in place (every method holding it sees each update)."""

    def __init__(self, view: ClusterView, cluster_id: str = "default") -> None:
        self.view = view
        self.cluster_id = cluster_id
        self.version = 0  # the blacklist version the view lists
        self._ends: dict[str, int] = {}  # node -> window end of its latest score record
        self._start = -1  # the start of the newest window seen

    def take(self, record: object) -> None:
        """One published record (other types are ignored)."""
        if isinstance(record, NodeScore):
            self.score(record)
        elif isinstance(record, BlacklistSnapshot) and record.cluster_id == self.cluster_id:
            self.snapshot(record)
        elif isinstance(record, BlacklistDelta) and record.cluster_id == self.cluster_id:
            self.delta(record)

    def score(self, score: NodeScore) -> None:
        node = score.node_id
        if score.window_end_us < self._ends.get(node, -1) or score.window_end_us <= self._start:
            return  # older than what the view holds, or a whole window old
        self.view.node_mean_z[node] = score.mean
        self._ends[node] = score.window_end_us
        if score.window_start_us > self._start:
            self._start = score.window_start_us
            for other, end in list(self._ends.items()):
                if end <= self._start:  # unchanged for a whole window: no samples in it any more
                    del self._ends[other]
                    del self.view.node_mean_z[other]

    def snapshot(self, snapshot: BlacklistSnapshot) -> None:
        """The whole blacklist of a version: the view lists exactly its nodes (unless it is older)."""
        if snapshot.version > self.version:
            self.version = snapshot.version
            self.view.listed = snapshot.node_ids

    def delta(self, delta: BlacklistDelta) -> None:
        """One change of the blacklist, applied to what the view lists (unless the view has it already)."""
        if delta.version > self.version:
            self.version = delta.version
            removed = {entry.node_id for entry in delta.removed}
            self.view.listed = frozenset(self.view.listed - removed | {entry.node_id for entry in delta.added})
