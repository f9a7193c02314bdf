"""``Wiring``: the topics, tables and settings ``streams.app`` hands to each agent's ``register``.

A module of its own, below the app and the agents, so an agent names the types it is given without importing
the app that imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from faust.types import TableT, TopicT

from streams.config import job_idle_timeout_us
from streams.core.events import (
    BlacklistSnapshot,
    Event,
    NodeSummary,
    NormalizedTask,
    Progress,
    TaskCheckpoint,
    TaskEventBatch,
    TaskFinish,
    TaskRows,
    TaskStart,
)
from streams.core.ranking_config import RankingConfig
from streams.health import ReadProgress
from streams.serde import topics as registry
from streams.settings import Settings

CheckpointTable = TableT[bytes, bytes]
TASK_EVENTS_TYPES: tuple[type[Event], ...] = registry.TASK_EVENTS.value_types + registry.JOB_EVENTS.value_types
# Summaries, marks and samples; task events for a detector that watches them (streams.core.ranker.watches_tasks).
FeedValue = (NodeSummary | Progress | TaskRows | TaskEventBatch | NormalizedTask | TaskStart | TaskCheckpoint
             | TaskFinish)
RANKING_FEED_TYPES: tuple[type[FeedValue], ...] = registry.RANKING_FEED.value_types


@dataclass
class Wiring:
    """Topics (raw bytes both ways: ``streams.serde`` decodes), checkpoint tables, settings, and the reader of
    the blacklist consumers already hold (``published_snapshot``: blocking, None when nothing is published)."""

    settings: Settings
    partitions: int
    ranking_config: RankingConfig
    task_events: TopicT
    node_samples: TopicT
    ranking_feed: TopicT
    node_scores: TopicT
    node_classes: TopicT
    blacklist_deltas: TopicT
    blacklist_snapshot: TopicT
    dead_letters: TopicT
    straggler_predictions: TopicT
    normalise_checkpoints: CheckpointTable
    rank_checkpoints: CheckpointTable
    predict_checkpoints: CheckpointTable
    published_snapshot: Callable[[], BlacklistSnapshot | None]
    task_events_types: tuple[type[Event], ...] = TASK_EVENTS_TYPES
    ranking_feed_types: tuple[type[FeedValue], ...] = RANKING_FEED_TYPES
    progress: ReadProgress | None = None  # what the agents read, for the health check

    @property
    def cluster_id(self) -> str:
        return self.settings.cluster_id

    @property
    def period_us(self) -> int:
        return self.ranking_config.period_us

    @property
    def job_idle_timeout_us(self) -> int:
        return job_idle_timeout_us(self.settings)
