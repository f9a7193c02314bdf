"""Agent ``normalise_tasks``: task and job events of one partition in, node samples and progress out."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streams.agents.checkpoint import PartitionStates
from streams.agents.common import send
from streams.agents.idleness import IdleClock, idle_timer
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
    idle = IdleClock(wiring.settings.idle_stream_timeout_s)
    lock = asyncio.Lock()  # one writer of the stages at a time: the agent or the idleness timer

    async def forget_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        idle.clear()  # a partition that comes back starts its wait anew

    app.on_partitions_revoked.connect(forget_revoked)

    async def emit(samples: list[Any], progress: Any) -> None:
        for sample in samples:
            await send(wiring.node_samples, sample.node_id, sample)
            await send(wiring.ranking_feed, wiring.cluster_id, sample)
        if progress is not None:
            await send(wiring.ranking_feed, wiring.cluster_id, progress)

    def release_if_idle(partition: int, stage: NormalizeStage) -> tuple[list[Any], Any]:
        if not idle.overdue(partition, stage.holds_progress):
            return [], None
        log.warning("partition %d: no job event let task events pass a ranking boundary for %.0f s; they no "
                    "longer wait for job-events until the next one (LAGGARD_IDLE_STREAM_TIMEOUT_S)",
                    partition, idle.after_s)
        return stage.mark_job_stream_idle()

    @app.agent(wiring.task_events, name="normalise_tasks")
    async def normalise_tasks(stream: Any) -> None:
        async for event in stream.noack().events():
            async with lock:
                await handle(stream, event)

    async def handle(stream: Any, event: Any) -> None:
        admitted = await states.admit(stream, event, wiring.dead_letters, wiring.task_events_types)
        if admitted is None:
            return
        stage, checkpointer, record = admitted
        samples, progress = stage.process(record)
        partition = event.message.partition
        more, later = release_if_idle(partition, stage)
        samples, progress = samples + more, later or progress
        if stage.job_stream_lag_us > wiring.job_idle_timeout_us and partition not in warned:
            warned.add(partition)
            log.warning("partition %d: task events are %.0f s of event time ahead of job-events and wait for "
                        "them (%d held); if this source publishes no job events, set "
                        "LAGGARD_WAIT_FOR_JOB_EVENTS=false", partition, stage.job_stream_lag_us / 1e6, stage.pending)
        await emit(samples, progress)
        if progress is not None or checkpointer.held >= CHECKPOINT_EVERY:
            await checkpointer.save(stream, stage.snapshot())

    async def release_all() -> None:
        # A crash before the agent's next checkpoint replays from the last one and sends the same samples again:
        # the ranking keys samples by job and task, so a repeat replaces, never adds.
        for partition, stage, _ in states.items():
            await emit(*release_if_idle(partition, stage))

    idle_timer(app, idle, lock, "release_idle_job_streams", release_all)

    return normalise_tasks
