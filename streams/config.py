"""What the Kafka wiring (``streams.app``) and the in-process runner (``streams.local``) both derive from the
settings: the pure ranking configuration, the job idle timeout in microseconds, and Kafka's partitioner.

It sits below both shells so neither imports the other.

>>> partition_for("job-1", 1), partition_for("job-1", 4) == partition_for("job-1", 4)
(0, True)
>>> job_idle_timeout_us(Settings(window_size_s=600, job_idle_timeout_s=60))
60000000
"""

from __future__ import annotations

from streams.core.prediction.base import PredictionContext
from streams.core.ranking_config import RankingConfig
from streams.partitioning import partition_of
from streams.settings import Settings

SECOND_US = 1_000_000


def partition_for(key: str, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a UTF-8 string key (no hash for one partition: the
    in-process runner asks once per event)."""
    if partitions == 1:
        return 0
    return partition_of(key.encode("utf-8"), range(partitions))


def ranking_config(settings: Settings) -> RankingConfig:
    """The pure ranking configuration from the operator's settings."""
    return RankingConfig(
        policy=settings.policy,
        window_size_us=round(settings.window_size_s * SECOND_US),
        period_us=round(settings.ranking_period_s * SECOND_US),
        min_tasks=settings.min_tasks,
        significance_floor=settings.significance_floor,
        max_fraction=settings.max_fraction,
        min_dwell_periods=settings.min_dwell_periods,
        allow_list=frozenset(settings.allow_list),
        deny_list=frozenset(settings.deny_list),
        seed=settings.seed,
        cluster_id=settings.cluster_id,
        mlna_sub_period_us=round(settings.mlna_sub_period_s * SECOND_US),
        mlna_sub_periods=settings.mlna_period,
        mlna_classifier=settings.mlna_classifier,
        mlna_threshold=settings.mlna_threshold,
        running_min_ratio=settings.running_min_ratio,
    )


def job_idle_timeout_us(settings: Settings) -> int:
    """How long a job may go without an event before it is final, in microseconds."""
    return round(settings.job_idle_timeout_s * SECOND_US)


def prediction_context(settings: Settings) -> PredictionContext:
    """The context a worker builds its predictors for (``laggard run`` builds the same, to show what it flags)."""
    return PredictionContext(initial_fraction=settings.nurd_initial_fraction, seed=settings.seed,
                             params={"nurd_alpha": settings.nurd_alpha, "nurd_epsilon": settings.nurd_epsilon})
