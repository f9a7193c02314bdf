"""Agent ``rank_nodes``: the cluster-wide ranking; publishes node scores, blacklist deltas and snapshots."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streams.agents.checkpoint import Checkpointer
from streams.agents.common import decode_or_dead_letter, send
from streams.agents.idleness import IdleClock, idle_timer
from streams.core.events import Progress
from streams.core.ranking import ScoreChanges
from streams.core.stages import RankResult, RankStage
from streams.serde.topics import RANKING_FEED

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 20000


def register(app: Any, wiring: Any) -> Any:
    """Define the agent on ``app``; ``wiring`` holds topics, tables, settings and the published version."""
    holder: dict[str, Any] = {}
    idle = IdleClock(wiring.settings.idle_stream_timeout_s)

    async def stage() -> tuple[RankStage, Checkpointer]:
        if "stage" not in holder:
            rank_stage = RankStage(wiring.ranking_config, wiring.partitions)
            checkpointer = Checkpointer(wiring.rank_checkpoints, f"rank:{wiring.cluster_id}".encode())
            state = checkpointer.load()
            restored = False
            if state is not None:
                try:
                    rank_stage.restore(state)
                    restored = True
                except ValueError as exc:
                    log.warning("%s; cold start", exc)
            # A blocking read of the compacted topic: off the event loop, so heartbeats go on meanwhile.
            published = await asyncio.get_running_loop().run_in_executor(None, wiring.published_snapshot)
            holder["stage"], holder["checkpointer"] = rank_stage, checkpointer
            holder["published"] = 0 if published is None else published.version
            if published is not None and not restored:
                # No state of our own but consumers hold version N: continue from their blacklist, so the
                # next delta is N + 1 against what they have, never a reused or unrelated version.
                rank_stage.ranker.adopt(published)
                log.warning("cold start: continuing from the published blacklist version %d", published.version)
            log.info("ranking resumes at %s; deltas up to version %d are already published",
                     checkpointer.offsets or "the beginning", holder["published"])
        return holder["stage"], holder["checkpointer"]

    async def publish(result: RankResult) -> None:
        changes = holder.setdefault("scores", ScoreChanges())  # a new holder (restart) republishes all once
        for score in changes.select(result.ranking):
            await send(wiring.node_scores, score.node_id, score)
        delta = result.delta
        if delta is None or delta.version <= holder["published"]:
            return  # nothing changed, or a replay after a restart of what consumers have already seen
        await send(wiring.blacklist_deltas, wiring.cluster_id, delta)
        await send(wiring.blacklist_snapshot, wiring.cluster_id, result.snapshot)
        holder["published"] = delta.version
        log.info("blacklist v%d: +%s -%s", delta.version, [e.node_id for e in delta.added],
                 [e.node_id for e in delta.removed])

    async def forget_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        # The feed may move to another worker and back: drop what this worker held, so the next event reloads
        # the checkpoint (whoever wrote it) and re-reads what consumers have already seen.
        if any(tp.topic == RANKING_FEED.name for tp in revoked):
            holder.clear()
            idle.clear()

    app.on_partitions_revoked.connect(forget_revoked)

    lock = asyncio.Lock()  # one writer of the ranking at a time: the agent or the idleness timer

    def declare_idle(rank_stage: RankStage) -> list[RankResult]:
        behind = set(rank_stage.holding_back())
        results: list[RankResult] = []
        for partition in range(wiring.partitions):
            if idle.overdue(partition, partition in behind):
                log.warning("normalising partition %d has not passed the latest ranking boundary for %.0f s; "
                            "ranking without it until it reports (LAGGARD_IDLE_STREAM_TIMEOUT_S)",
                            partition, idle.after_s)
                results += rank_stage.mark_idle(partition)
        return results

    async def publish_all(rank_stage: RankStage, results: list[RankResult]) -> None:
        for result in results:
            await publish(result)
        late = rank_stage.ranker.late_samples
        if results and not holder.get("warned_late") and late >= 100 and late >= 0.1 * rank_stage.samples_seen:
            holder["warned_late"] = True
            log.warning("%d of %d z-values reached the ranking after their task had left the window and were "
                        "never ranked: jobs with no JobFinish are final only after LAGGARD_JOB_IDLE_TIMEOUT_S; "
                        "keep it well below LAGGARD_WINDOW_SIZE_S", late, rank_stage.samples_seen)

    @app.agent(wiring.ranking_feed, name="rank_nodes")
    async def rank_nodes(stream: Any) -> None:
        async for event in stream.noack().events():
            async with lock:
                await handle(stream, event)

    async def handle(stream: Any, event: Any) -> None:
        rank_stage, checkpointer = await stage()
        if checkpointer.covered(event):
            await stream.ack(event)
            return
        checkpointer.hold(event)
        record = await decode_or_dead_letter(event, wiring.dead_letters, wiring.ranking_feed_types)
        if record is None:
            return
        results: list[RankResult] = []
        if isinstance(record, Progress):
            results = rank_stage.progress(record)
        else:
            rank_stage.add(record)
        results += declare_idle(rank_stage)
        await publish_all(rank_stage, results)
        if results or checkpointer.held >= CHECKPOINT_EVERY:
            await checkpointer.save(stream, rank_stage.snapshot())

    async def rank_without_idle() -> None:
        # A crash before the agent's next checkpoint replays the feed from the last one; the versions already
        # published are not published again.
        rank_stage = holder.get("stage")  # None before the first record and after a revocation
        if rank_stage is not None:
            await publish_all(rank_stage, declare_idle(rank_stage))

    idle_timer(app, idle, lock, "rank_without_idle_partitions", rank_without_idle)

    return rank_nodes
