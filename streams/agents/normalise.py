"""Agent ``normalise_tasks``: task and job events of one partition in, node samples and progress out."""

from __future__ import annotations

import asyncio

import faust
from faust.types import AgentT

from streams.agents.checkpoint import PartitionStates, RawStream, unacked_events
from streams.agents.common import send
from streams.agents.idleness import (
    IdleClock,
    clear_on_revoke,
    idle_timer,
    release_job_stream_if_idle,
    warn_once_if_waiting,
)
from streams.core.events import NormalizedTask, Progress
from streams.core.stages import NormalizeStage
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS
from streams.wiring import Wiring

CHECKPOINT_EVERY = 5000  # events at most between checkpoints, to bound what is held un-acked
TOPICS = (TASK_EVENTS.name, JOB_EVENTS.name)


def register(app: faust.App, wiring: Wiring) -> AgentT[bytes]:
    """Define the agent on ``app``; ``wiring`` holds topics, tables and settings (see streams.app)."""
    states = PartitionStates(
        app, wiring.normalise_checkpoints,
        lambda p: NormalizeStage(p, wiring.partitions, wiring.period_us, wiring.job_idle_timeout_us,
                                 wait_for_job_events=wiring.settings.wait_for_job_events),
        TOPICS, key=lambda p: f"normalise:{p}".encode())
    idle = IdleClock(wiring.settings.idle_stream_timeout_s)
    clear_on_revoke(app, idle, TOPICS)
    lock = asyncio.Lock()  # one writer of the stages at a time: the agent or the idleness timer
    waiting: set[int] = set()  # partitions warned about waiting for job events

    async def emit(samples: list[NormalizedTask], progress: Progress | None) -> None:
        for sample in samples:
            await send(wiring.node_samples, sample.node_id, sample)
            await send(wiring.ranking_feed, wiring.cluster_id, sample)
        if progress is not None:
            await send(wiring.ranking_feed, wiring.cluster_id, progress)

    @app.agent(wiring.task_events, name="normalise_tasks")
    async def normalise_tasks(stream: RawStream) -> None:
        async for event in unacked_events(stream, "normalise_tasks", wiring.progress):
            async with lock:
                admitted = await states.admit(stream, event, wiring.dead_letters, wiring.task_events_types)
                if admitted is None:
                    continue
                stage = admitted.slot.state
                samples, progress = stage.process(admitted.record)
                released, later = release_job_stream_if_idle(idle, stage)
                warn_once_if_waiting(stage, wiring.job_idle_timeout_us, waiting)
                await emit(samples + released, later or progress)
                if progress is not None or later is not None or admitted.slot.checkpointer.held >= CHECKPOINT_EVERY:
                    await admitted.slot.save(stream)

    async def release_all() -> None:
        # A crash before the agent's next checkpoint replays from the last one and sends the same samples again:
        # the ranking keys samples by job and task, so a repeat replaces, never adds.
        for slot in states.slots():
            await emit(*release_job_stream_if_idle(idle, slot.state))

    idle_timer(app, idle, lock, "release_idle_job_streams", release_all)
    return normalise_tasks
