"""What the ranking publishes, given what its consumers have already seen: the decision half of the rank agent.

The ranking stage (``streams.core.stages.RankStage``) turns samples and progress into ``RankResult``s. Before
they leave, three rules apply, the same in the Kafka worker and in the in-process runner:

- consumers never see a version go backwards: a delta whose version is not above the last one published (a
  replay after a restart, a partition handed back) is not published again;
- a ranking that starts with no state of its own while consumers hold version N continues from their
  blacklist, so its next delta is N + 1 against what they have (``resume``);
- ``node-scores`` carries only the nodes whose statistics changed since last sent (``ScoreChanges``);
- z-values that reach the ranking after their task left the window are counted, and one warning says so when
  they are a tenth or more of all samples (``late_warning``).

>>> from streams.core.events import NormalizedTask, Progress
>>> from streams.core.ranking_config import RankingConfig
>>> config = RankingConfig(window_size_us=100, period_us=10, min_tasks=2, significance_floor=None,
...                        max_fraction=1.0)
>>> samples = [NormalizedTask("j", f"t{i}", 0, "slow" if i < 2 else f"n{i % 3}", 5, 1, z)
...            for i, z in enumerate([2.0, 2.1, 0.0, 0.1, -0.1, 0.0, 0.1, -0.1])]
>>> ranking = PublishedRanking(RankStage(config, partitions=1), published_version=0)
>>> [ranking.take(sample) for sample in samples][0]  # samples wait for the boundary
[]
>>> [(p.delta.version, [e.node_id for e in p.delta.added]) for p in ranking.take(Progress(0, 1, 12))]
[(1, ['slow'])]
>>> replayed = PublishedRanking(RankStage(config, partitions=1), published_version=1)
>>> _ = [replayed.take(sample) for sample in samples]
>>> [p.delta for p in replayed.take(Progress(0, 1, 12))]  # a replay: version 1 is out already
[None]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    NodeClass,
    NodeScore,
    NodeSummary,
    NormalizedTask,
    Progress,
)
from streams.core.rank_stage import RankResult, RankStage
from streams.core.ranking import ScoreChanges

LATE_WARNING_MIN = 100  # late samples before the warning can fire
LATE_WARNING_SHARE = 0.1  # of all samples seen
BLIND_WARNING_AFTER = 10  # periods without a forwarded task event before a task-watching detector warns


@dataclass(frozen=True)
class Publication:
    """One ranking boundary as it leaves: the changed node scores, and the delta with its snapshot unless
    consumers have that version already (then both are None)."""

    result: RankResult
    scores: list[NodeScore]
    delta: BlacklistDelta | None
    snapshot: BlacklistSnapshot | None
    # ML-NA's records of the periods its detector closed at this boundary (``node-classes``); other detectors
    # have none. They are not checkpointed: the compacted topic gets every node's class again next period.
    node_classes: list[NodeClass] = field(default_factory=list)


class PublishedRanking:
    """The cluster-wide ranking together with what its consumers have seen; the rank agent's one state.

    ``published_version`` is the newest version on ``blacklist-snapshot`` (0: none); ``scores`` off skips
    the ``node-scores`` selection where nobody reads it (the in-process runner). Only the stage is
    checkpointed: after a restart the shell reads the published version again from the topic.
    """

    def __init__(self, stage: RankStage, published_version: int = 0, scores: bool = True) -> None:
        self.stage = stage
        self.published_version = published_version
        self._scores = ScoreChanges() if scores else None  # a new one (restart) republishes all once
        self._warned_late = False
        self._warned_blind = False

    def resume(self, published: BlacklistSnapshot | None, restored: bool) -> bool:
        """Start after ``published``, the consumers' latest snapshot; True when the ranking adopted it (it
        had no state of its own, so its next delta must follow what they hold, never reuse a version)."""
        self.published_version = 0 if published is None else published.version
        if published is None or restored:
            return False
        self.stage.ranker.adopt(published)
        return True

    def take(self, record: NodeSummary | NormalizedTask | Progress) -> list[Publication]:
        """A record of the ranking feed in; what the boundaries it completed publish out."""
        if isinstance(record, Progress):
            return self.publish(self.stage.progress(record))
        self.stage.add(record)
        return []

    def mark_idle(self, partition: int) -> list[Publication]:
        """Rank without a silent normalising partition (the shell's judgement, see ``RankStage.mark_idle``)."""
        return self.publish(self.stage.mark_idle(partition))

    def finish(self, ts_us: int) -> list[Publication]:
        """End of a finite trace (see ``RankStage.finish``)."""
        return self.publish(self.stage.finish(ts_us))

    def publish(self, results: list[RankResult]) -> list[Publication]:
        out = []
        for result in results:
            scores = self._scores.select(result.ranking) if self._scores is not None else []
            take = getattr(self.stage.ranker.detector, "take_node_classes", None)
            classes: list[NodeClass] = take() if take is not None else []
            delta = result.delta
            if delta is None or delta.version <= self.published_version:
                out.append(Publication(result, scores, None, None, classes))
                continue
            self.published_version = delta.version
            out.append(Publication(result, scores, delta, result.snapshot, classes))
        return out

    @property
    def late_samples(self) -> int:
        return self.stage.ranker.late_samples

    def late_warning(self) -> str | None:
        """Once, when many z-values arrived after their task had left the window: the words of the warning; or
        once, when the policy's detector watches task events and none came in ``BLIND_WARNING_AFTER`` periods
        (ranked or not: a ranking fed marks alone ranks nothing). Cheap: shells ask after every batch."""
        periods = self.stage.periods_passed
        if (not self._warned_blind and periods >= BLIND_WARNING_AFTER and self.stage.observed == 0
                and hasattr(self.stage.ranker.detector, "observe")):
            self._warned_blind = True
            return (f"policy {self.stage.ranker.config.policy} watches task events, but none reached the ranking in "
                    f"{periods} periods: the normalising workers do not forward them (another policy "
                    "set there, e.g. mid-way through a rolling change?), and it lists nothing from them")
        late, seen = self.late_samples, self.stage.samples_seen
        if self._warned_late or late < LATE_WARNING_MIN or late < LATE_WARNING_SHARE * seen:
            return None
        self._warned_late = True
        return (f"{late} of {seen} z-values reached the ranking after their task had left the window and were "
                "never ranked (neither provisionally nor finally): a normalising partition lags far behind the "
                "others, or its events arrive late")

    def snapshot(self) -> dict[str, Any]:
        return self.stage.snapshot()

    def restore(self, state: dict[str, Any]) -> None:
        self.stage.restore(state)
