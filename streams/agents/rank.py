"""Agent ``rank_nodes``: the cluster-wide ranking; publishes node scores, blacklist deltas and snapshots.

The ranking feed has one partition, so the agent has one state: a ``PublishedRanking`` (streams.core.publication),
which decides what leaves; the agent decodes, calls it, and sends. The feed carries one summary per normalising
partition and ranking period (and their progress marks), so its volume follows the nodes, not the tasks; it is
read in batches like the task events.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

import faust
from faust.types import AgentT

from streams import metrics
from streams.agents.checkpoint import Outputs, PartitionStates, RawEvent, RawStream, processed, unacked_batches
from streams.agents.common import send, send_raw
from streams.agents.idleness import IdleClock, backlog_of, clear_on_revoke, idle_timer, rank_without_idle
from streams.agents.records import RepeatsLog, published, take_forwarded
from streams.core.events import Progress, TaskEvent, TaskEventBatch, TaskRows
from streams.core.publication import Publication, PublishedRanking
from streams.core.stages import RankStage
from streams.health import ReadProgress
from streams.serde import codec
from streams.serde.topics import (
    BLACKLIST_DELTAS,
    BLACKLIST_SNAPSHOT,
    JOB_EVENTS,
    NODE_CLASSES,
    NODE_SCORES,
    RANKING_FEED,
    TASK_EVENTS,
    source_of,
)
from streams.wiring import Wiring

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 20000
BATCH_MAX = 500
BATCH_WITHIN_S = 0.02
BUSY_NOTE_S = 5.0  # while a progress mark ranks, the health check hears this often that the agent works


async def ranked(ranking: PublishedRanking, record: object, event: RawEvent, progress: ReadProgress | None
                 ) -> list[Publication]:
    """``ranking.take(record)``; a progress mark off the event loop. One mark can complete many boundaries (a
    catch-up: 25 s for the first mark of three Google parts, minutes for ten), and ranked on the loop it stopped
    every timer of the worker, the health check among them, which then found the feed unread for longer than
    the stall timeout and restarted the worker, which ranked the same boundaries again from its checkpoint
    (#18: the Google replay stuck at version 18). The caller holds the ranking's lock; nothing else touches
    the state meanwhile."""
    if not isinstance(record, Progress):
        return ranking.take(record)  # type: ignore[arg-type]  # a summary or sample: kept, not ranked
    work = asyncio.get_running_loop().run_in_executor(None, ranking.take, record)
    while True:
        done, _ = await asyncio.wait({work}, timeout=BUSY_NOTE_S)
        if done:
            return work.result()
        processed(event, progress)


def register(app: faust.App, wiring: Wiring) -> AgentT[bytes]:
    """Define the agent on ``app``; ``wiring`` holds topics, tables, settings and the published version."""

    async def resume(partition: int, ranking: PublishedRanking, restored: bool) -> None:
        # A blocking read of the compacted topic: off the event loop, so heartbeats go on meanwhile.
        published = await asyncio.get_running_loop().run_in_executor(None, wiring.published_snapshot)
        if ranking.resume(published, restored):
            log.warning("cold start: continuing from the published blacklist version %d", ranking.published_version)
        log.info("deltas up to version %d are already published", ranking.published_version)

    # After a revocation the next event reloads the checkpoint (whoever wrote it) and re-reads the topic.
    states = PartitionStates(
        app, wiring.rank_checkpoints, lambda _: PublishedRanking(RankStage(wiring.ranking_config, wiring.partitions)),
        (RANKING_FEED.name,), key=lambda _: f"rank:{wiring.cluster_id}".encode(), on_load=resume)
    # A normalising partition is not idle while its progress mark may wait unread (the feed, or its own events).
    backlog = backlog_of(app, wiring.settings.idle_stream_timeout_s)
    idle = IdleClock(wiring.settings.idle_stream_timeout_s, behind=lambda p: backlog.behind(
        (RANKING_FEED.name, 0), (TASK_EVENTS.name, cast(int, p)), (JOB_EVENTS.name, cast(int, p))))
    clear_on_revoke(app, idle, (RANKING_FEED.name,))
    lock = asyncio.Lock()  # one writer of the ranking at a time: the agent or the idleness timer
    outputs = Outputs()  # a checkpoint past a delta only once the delta is on the broker
    wired = {NODE_SCORES.name: "node_scores", NODE_CLASSES.name: "node_classes",  # topic -> Wiring field
             BLACKLIST_DELTAS.name: "blacklist_deltas", BLACKLIST_SNAPSHOT.name: "blacklist_snapshot"}

    async def publish(ranking: PublishedRanking, publications: list[Publication], last: RawEvent | None = None
                      ) -> None:
        for publication in publications:
            if last is not None:  # a catch-up publishes many rankings: the health check sees it working
                processed(last, wiring.progress)
            for topic, key, record in published(publication, wiring.cluster_id):
                outputs.track(await send(getattr(wiring, wired[topic]), key, record))
        warning = ranking.late_warning()  # also without publications: a ranking fed marks alone
        if warning is not None:
            log.warning(warning)

    repeats_log = RepeatsLog()

    @app.agent(wiring.ranking_feed, name="rank_nodes")
    async def rank_nodes(stream: RawStream) -> None:
        async for batch in unacked_batches(stream, BATCH_MAX, BATCH_WITHIN_S, "rank_nodes", wiring.progress):
            async with lock:
                slot, publications, repeats = None, [], 0
                started = time.perf_counter()
                for event in batch:
                    admitted = await states.admit(stream, event, wiring.dead_letters, wiring.ranking_feed_types)
                    if admitted is not None:
                        slot = admitted.slot
                        record = admitted.record
                        if isinstance(record, TaskRows | TaskEventBatch):  # forwarded
                            again, letters = take_forwarded(slot.state.stage, record, event.message.timestamp)
                            repeats += again
                            for letter in letters:
                                outputs.track(await send_raw(wiring.dead_letters, letter.key, codec.encode(letter)))
                        elif isinstance(admitted.record, TaskEvent):  # forwarded one by one, before the batches
                            repeats += not slot.state.stage.observe(admitted.record, source_of(event.message.headers))
                        else:
                            publications += await ranked(slot.state, admitted.record, event, wiring.progress)
                    processed(event, wiring.progress)
                    backlog.processed((event.message.topic, event.message.partition), event.message.offset)
                repeats_log.dropped(repeats)
                if slot is None or states.stale(batch[-1]):
                    # Nothing new, or a rebalance overtook the batch (a long ranking gives it time): its events
                    # come again to whoever holds the feed now; this state was forgotten and is not saved.
                    continue
                publications += rank_without_idle(idle, slot.state)
                if publications:
                    metrics.RANKING_DURATION.observe(time.perf_counter() - started)
                await publish(slot.state, publications, batch[-1])
                if publications or slot.checkpointer.held >= CHECKPOINT_EVERY:
                    await slot.save(stream, outputs)

    async def rank_without_idle_partitions() -> None:
        # A crash before the agent's next checkpoint replays the feed from the last one; the versions already
        # published are not published again.
        for slot in states.slots():  # none before the first record and after a revocation
            await publish(slot.state, rank_without_idle(idle, slot.state))

    idle_timer(app, idle, lock, "rank_without_idle_partitions", rank_without_idle_partitions)
    return rank_nodes
