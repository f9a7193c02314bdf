"""Agent ``normalise_tasks``: task and job events of one partition in, node samples and progress out."""

from __future__ import annotations

import logging
from typing import Any

from streams.agents.checkpoint import PartitionStates
from streams.agents.common import send
from streams.core.stages import NormalizeStage
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 5000  # events at most between checkpoints, to bound what is held un-acked


def register(app: Any, wiring: Any) -> Any:
    """Define the agent on ``app``; ``wiring`` holds topics, tables and settings (see streams.app)."""
    states = PartitionStates(
        app, wiring.normalise_checkpoints, "normalise",
        lambda p: NormalizeStage(p, wiring.partitions, wiring.period_us, wiring.job_idle_timeout_us,
                                 wait_for_job_events=wiring.settings.wait_for_job_events),
        (TASK_EVENTS.name, JOB_EVENTS.name))
    warned: set[int] = set()

    @app.agent(wiring.task_events, name="normalise_tasks")
    async def normalise_tasks(stream: Any) -> None:
        async for event in stream.noack().events():
            admitted = await states.admit(stream, event, wiring.dead_letters, wiring.task_events_types)
            if admitted is None:
                continue
            stage, checkpointer, record = admitted
            samples, progress = stage.process(record)
            if stage.job_stream_lag_us > wiring.job_idle_timeout_us and event.message.partition not in warned:
                warned.add(event.message.partition)
                log.warning("partition %d: task events are %.0f s of event time ahead of job-events and wait for "
                            "them (%d held); if this source publishes no job events, set "
                            "LAGGARD_WAIT_FOR_JOB_EVENTS=false", event.message.partition,
                            stage.job_stream_lag_us / 1e6, stage.pending)
            for sample in samples:
                await send(wiring.node_samples, sample.node_id, sample)
                await send(wiring.ranking_feed, wiring.cluster_id, sample)
            if progress is not None:
                await send(wiring.ranking_feed, wiring.cluster_id, progress)
            if progress is not None or checkpointer.held >= CHECKPOINT_EVERY:
                await checkpointer.save(stream, stage.snapshot())

    return normalise_tasks
