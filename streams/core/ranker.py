"""NodeRanker: window statistics -> detector -> decision -> book, one object per cluster.

This is what the ``node-samples`` agent, the in-process runner and ``laggard rank`` drive. The policy named
by ``RankingConfig.policy`` (``streams.core.decision.registry.POLICIES``) gives the detector and the
selection rule; the ranker only composes: samples go to the windows and to the detector (``learn``), each
period the window statistics (``WindowView``) go to the detector (``detect``), its evidence to the decision
layer (``BlacklistPolicy``), the verdicts to the book (``BlacklistBook``), which issues the deltas. It is
moved only by event time passed in (``rank(now_us)``, ``decide(now_us)``), never by a clock, and its whole
state is plain JSON-able data (``snapshot()`` / ``restore()``), versioned.
"""

from __future__ import annotations

from typing import Any

from streams.core.decision.book import BlacklistBook
from streams.core.decision.policy import BlacklistPolicy, nodes_seen
from streams.core.decision.registry import POLICIES
from streams.core.detection.base import NodeDetector, WindowView, judges_recent_nodes, observes_tasks
from streams.core.events import BlacklistDelta, BlacklistSnapshot, NodeSummary, NormalizedTask
from streams.core.ranking import NodeRank, Ranking
from streams.core.ranking_config import RankingConfig
from streams.core.rows import RowCache
from streams.core.windows import NodeWindows

# 2: the detector's state joined the snapshot (issue 14); 3: windows of moments (issue 18). Another version
# means a cold start.
SNAPSHOT_VERSION = 3


class NodeRanker:
    """Rank nodes by their recent normalised task times and keep a blacklist of the clearly slow.

    >>> ranker = NodeRanker(RankingConfig(max_fraction=0.5))
    >>> for i in range(20):  # n0 is slow: its tasks run 1.5 job stds behind their siblings
    ...     for node, z in (("n0", 1.5), ("n1", -0.5), ("n2", -0.4), ("n3", -0.6)):
    ...         ranker.update(NormalizedTask(f"j{i}", node, 0, node, 60_000_000 * i, 1, z + 0.01 * (i % 3)))
    >>> delta = ranker.decide(now_us=1_500_000_000)
    >>> delta.version, [entry.node_id for entry in delta.added]
    (1, ['n0'])
    >>> ranker.blacklist.node_ids
    frozenset({'n0'})
    >>> ranker.decide(now_us=1_800_000_000) is None  # same evidence, no change
    True
    """

    def __init__(self, config: RankingConfig | None = None) -> None:
        self.config = config if config is not None else RankingConfig()
        policy = POLICIES.get(self.config.policy)
        self._make_detector = policy.detector
        self.detector: NodeDetector = policy.detector(self.config)
        self._windows = self._new_windows()
        self._policy = BlacklistPolicy(self.config, policy.select)
        self._book = BlacklistBook(self.config.cluster_id, self.config.policy)
        self._rows = RowCache()

    def _new_windows(self) -> NodeWindows:
        return NodeWindows(self.config.window_size_us, self.config.period_us, self.config.confidence)

    @property
    def blacklist(self) -> BlacklistSnapshot:
        """The current blacklist (version of the last delta, 0 before any)."""
        return self._book.snapshot

    @property
    def late_samples(self) -> int:
        """Samples dropped because they were older than the window when they arrived."""
        return self._windows.late_samples

    def update(self, sample: NormalizedTask) -> None:
        """Add one node sample (a later sample of the same job and task replaces the earlier one)."""
        self._windows.update(sample)
        self.detector.learn(sample)

    def merge(self, summary: NodeSummary) -> None:
        """Add a normalising partition's per-node moments (see ``NodeWindows.merge``). Detectors see them
        through the window statistics; ``learn`` is called with single samples only."""
        self._windows.merge(summary)

    def rank(self, now_us: int) -> Ranking:
        """Statistics, level and verdict of every node in the window ending at the period boundary
        at or before ``now_us``; the blacklist itself is unchanged (see ``decide``)."""
        start, end = self._windows.advance(now_us)
        stats = self._windows.stats()
        view = WindowView(start, end, stats, self._windows.mean_count)
        evidence = self.detector.detect(view)
        seen = nodes_seen(stats, evidence, judges_recent_nodes(self.detector))
        verdicts = self._policy.judge(view, evidence, self._book.listed, seen)
        return Ranking(start, end, self.config.policy, self._rows.ordered(stats, evidence, verdicts),
                       self.config.cap(seen), view.mean_count, seen)

    def decide(self, now_us: int) -> BlacklistDelta | None:
        """Rank, then move the blacklist to the verdicts; return the delta, None when nothing changed."""
        return self._book.apply(self.rank(now_us))

    def decide_ranking(self, now_us: int) -> tuple[Ranking, BlacklistDelta | None]:
        """Like ``decide``, also returning the ranking behind it (for ``node-scores`` and reports)."""
        ranking = self.rank(now_us)
        return ranking, self._book.apply(ranking)

    def decide_guards(self, now_us: int) -> tuple[Ranking, BlacklistDelta | None]:
        """The deny-list alone, at the boundary at or before ``now_us``, before any ranking with data: its nodes need
        no evidence, so consumers need not wait for the first task to finish (``RankStage``). A ranking with no
        statistics: every node listed already stays, no window moves, no detector or policy is asked.

        >>> ranker = NodeRanker(RankingConfig(deny_list=frozenset({"bad"})))
        >>> ranking, delta = ranker.decide_guards(650_000_000)
        >>> ranking.window_end_us, [(e.node_id, e.reason) for e in delta.added], ranking.ranked
        (600000000, [('bad', 'on the deny-list')], ())
        >>> ranker.decide_guards(900_000_000)[1] is None  # listed already
        True
        """
        end = now_us // self.config.period_us * self.config.period_us
        deny, kept = self.config.deny_list, self._book.listed.keys()
        rows = tuple(NodeRank(node, None, None, False, True,
                              "on the deny-list" if node in deny else "listed before the ranking had data")
                     for node in sorted(deny | kept))
        ranking = Ranking(end - self.config.window_size_us, end, self.config.policy, rows, self.config.cap(0))
        return ranking, self._book.apply(ranking)

    def adopt(self, published: BlacklistSnapshot) -> None:
        """Start from the blacklist consumers already have (see ``BlacklistBook.adopt``)."""
        self._book.adopt(published)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain JSON-able data."""
        return {"version": SNAPSHOT_VERSION, "windows": self._windows.snapshot(), "book": self._book.state(),
                "detector": {"name": self.detector.name, "state": self.detector.snapshot()}}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a ``snapshot()``; a snapshot of another version or detector raises ValueError and
        leaves this ranker as it was (the caller cold-starts)."""
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown NodeRanker snapshot version {state.get('version')!r}")
        saved = state["detector"]
        if saved.get("name") != self.detector.name:
            raise ValueError(f"NodeRanker snapshot of detector {saved.get('name')!r}, "
                             f"policy {self.config.policy!r} runs {self.detector.name!r}")
        # Restored into new parts, swapped in only when all three read their state.
        windows, detector = self._new_windows(), self._make_detector(self.config)
        book = BlacklistBook(self.config.cluster_id, self.config.policy)
        windows.restore(state["windows"])
        book.load(state["book"])
        detector.restore(saved["state"])
        self._windows, self._book, self.detector = windows, book, detector


def learns_from_samples(config: RankingConfig) -> bool:
    """Whether the policy's detector learns from single samples (``learn``), so the ranking must be fed
    samples; detectors that read only the window statistics declare ``learns_from_samples = False`` and are
    fed per-node summaries instead (issue 18)."""
    return bool(getattr(POLICIES.get(config.policy).detector(config), "learns_from_samples", True))


def watches_tasks(config: RankingConfig) -> bool:
    """Whether the policy's detector also watches the task events themselves (a ``TaskObserver``: the running-task
    detector), so the normalising side must forward every valid task event to the ranking (issue 21). The test is
    ``observes_tasks``.

    >>> watches_tasks(RankingConfig(policy="running")), watches_tasks(RankingConfig(policy="pcores"))
    (True, False)
    """
    return observes_tasks(POLICIES.get(config.policy).detector(config))

