"""Agent ``normalise_tasks``: task and job events of one partition in; final z-values (``node-samples``), and per
ranking boundary a summary and a progress mark (``ranking-feed``) out.

Events come in batches (``BATCH_MAX`` events or what arrived within ``BATCH_WITHIN_S``); each partition's share
of a batch goes through its stage in one call, and the batch is acknowledged at the next checkpoint.
"""

from __future__ import annotations

import asyncio
from typing import cast

import faust
from faust.types import AgentT
from faust.types.tuples import TP

from streams import metrics
from streams.agents.checkpoint import Outputs, PartitionStates, RawEvent, RawStream, Slot, on_revoke, unacked_batches
from streams.agents.common import send, send_raw
from streams.agents.idleness import (
    IdleClock,
    backlog_of,
    caught_up_of,
    clear_on_revoke,
    idle_timer,
    release_job_stream_if_idle,
    warn_once_if_waiting,
)
from streams.agents.records import forwarded
from streams.core.events import Event, TaskEvent
from streams.core.ranker import learns_from_samples, watches_tasks
from streams.core.stages import Emitted, NormalizeStage
from streams.serde import codec
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS
from streams.wiring import Wiring

CHECKPOINT_EVERY = 5000  # events at most between checkpoints, to bound what is held un-acked
BATCH_MAX = 2000  # events per batch at most
BATCH_WITHIN_S = 0.05  # a batch waits at most this long to fill: small against a ranking period in wall time
TOPICS = (TASK_EVENTS.name, JOB_EVENTS.name)


def register(app: faust.App, wiring: Wiring) -> AgentT[bytes]:
    """Define the agent on ``app``; ``wiring`` holds topics, tables and settings (see streams.app)."""
    summaries = not learns_from_samples(wiring.ranking_config)  # else the detector needs every sample
    forwards = watches_tasks(wiring.ranking_config)  # the detector watches the task events themselves (issue 21)
    batches = wiring.settings.forward_format == "batches"  # for rankings before the rows (rolling upgrade)
    feed_key = codec.encode_key(wiring.cluster_id)
    states = PartitionStates(
        app, wiring.normalise_checkpoints,
        lambda p: NormalizeStage(p, wiring.partitions, wiring.period_us, wiring.job_idle_timeout_us,
                                 wait_for_job_events=wiring.settings.wait_for_job_events,
                                 window_us=wiring.ranking_config.window_size_us, summaries=summaries),
        TOPICS, key=lambda p: f"normalise:{p}".encode())
    # A catch-up is not idleness: a job stream is not idle while events of its partition wait unread.
    backlog = backlog_of(app, wiring.settings.idle_stream_timeout_s)
    # A job stream this agent has read to its end is silent by the producer's choice: idle after a short grace.
    # Asked of the agent's own view of what it took (streams.agents.taken), which every seek makes unknown.
    idle = IdleClock(wiring.settings.idle_stream_timeout_s,
                     behind=lambda p: backlog.behind(*((topic, cast(int, p)) for topic in TOPICS)),
                     caught_up=caught_up_of(app, states.taken, JOB_EVENTS.name, wiring.settings, "normalise_tasks"),
                     grace_s=wiring.settings.caught_up_grace_s)
    clear_on_revoke(app, idle, TOPICS)

    async def forget_revoked(revoked: set[TP]) -> None:  # their series go with them (the next owner serves them)
        metrics.forget_late_events(tp.partition for tp in revoked if tp.topic == TASK_EVENTS.name)

    on_revoke(app, forget_revoked)
    lock = asyncio.Lock()  # one writer of the stages at a time: the agent or the idleness timer
    waiting: set[int] = set()  # partitions warned about waiting for job events
    outputs = Outputs()  # what the next checkpoint waits for: it must not reach the broker before them

    async def emit(emitted: Emitted) -> None:
        # Final values once each to node-samples; the ranking gets the summaries, then the progress mark.
        for sample in emitted.samples:
            outputs.track(await send(wiring.node_samples, sample.node_id, sample))
            if not summaries:
                outputs.track(await send(wiring.ranking_feed, wiring.cluster_id, sample))
        for summary in emitted.summaries:
            outputs.track(await send(wiring.ranking_feed, wiring.cluster_id, summary))
        if emitted.progress is not None:
            outputs.track(await send(wiring.ranking_feed, wiring.cluster_id, emitted.progress))

    async def forward(events: list[tuple[RawEvent, TaskEvent]]) -> None:
        # Valid task events to the ranking's detector, before the marks processing them leads to: every event of a
        # partition before a boundary is on the feed before the partition's mark past it. The values it takes, in
        # TaskRows records that name where (the ranking drops what a restart forwards again).
        read = ((e.message.topic, e.message.partition, e.message.offset, cast(bytes, e.message.value), record)
                for e, record in events)  # it decoded
        for value in forwarded(read, batches):
            outputs.track(await send_raw(wiring.ranking_feed, feed_key, value))

    async def step(stream: RawStream, slot: Slot[NormalizeStage], events: list[Event]) -> None:
        stage = slot.state
        emitted = stage.process_batch(events)
        released = release_job_stream_if_idle(idle, stage)
        metrics.late_events(stage.partition, stage.late_events)
        warn_once_if_waiting(stage, wiring.job_idle_timeout_us, waiting)
        await emit(Emitted(emitted.samples + released.samples, emitted.summaries + released.summaries,
                           released.progress or emitted.progress))
        if emitted.progress is not None or released.progress is not None or slot.checkpointer.held >= CHECKPOINT_EVERY:
            await slot.save(stream, outputs)

    @app.agent(wiring.task_events, name="normalise_tasks")
    async def normalise_tasks(stream: RawStream) -> None:
        async for batch in unacked_batches(stream, BATCH_MAX, BATCH_WITHIN_S, "normalise_tasks", wiring.progress):
            async with lock:
                by_partition: dict[int, tuple[Slot[NormalizeStage], list[Event], list[tuple[RawEvent, TaskEvent]]]] = {}
                for event in batch:
                    backlog.processed((event.message.topic, event.message.partition), event.message.offset)
                    admitted = await states.admit(stream, event, wiring.dead_letters, wiring.task_events_types)
                    if admitted is not None:
                        _, events, forwarded = by_partition.setdefault(admitted.slot.partition,
                                                                       (admitted.slot, [], []))
                        events.append(admitted.record)
                        if forwards and isinstance(admitted.record, TaskEvent):
                            forwarded.append((event, admitted.record))
                for slot, events, forwarded in by_partition.values():
                    await forward(forwarded)
                    await step(stream, slot, events)

    async def release_all() -> None:
        # A crash before the agent's next checkpoint replays from the last one and sends the same summaries
        # again: the ranking keys them by partition and boundary, so a repeat replaces, never adds.
        for slot in states.slots():
            await emit(release_job_stream_if_idle(idle, slot.state))
            metrics.late_events(slot.state.partition, slot.state.late_events)

    idle_timer(app, idle, lock, "release_idle_job_streams", release_all)
    return normalise_tasks
