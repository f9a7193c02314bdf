"""Agent ``rank_nodes``: the cluster-wide ranking; publishes node scores, blacklist deltas and snapshots."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streams.agents.checkpoint import Checkpointer
from streams.agents.common import decode_or_dead_letter, send
from streams.core.events import Progress
from streams.core.stages import RankResult, RankStage
from streams.serde.topics import RANKING_FEED

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 20000


def register(app: Any, wiring: Any) -> Any:
    """Define the agent on ``app``; ``wiring`` holds topics, tables, settings and the published version."""
    holder: dict[str, Any] = {}

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
        for score in result.ranking.node_scores():
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

    app.on_partitions_revoked.connect(forget_revoked)

    @app.agent(wiring.ranking_feed, name="rank_nodes")
    async def rank_nodes(stream: Any) -> None:
        async for event in stream.noack().events():
            rank_stage, checkpointer = await stage()
            if checkpointer.covered(event):
                await stream.ack(event)
                continue
            checkpointer.hold(event)
            record = await decode_or_dead_letter(event, wiring.dead_letters, wiring.ranking_feed_types)
            if record is None:
                continue
            results: list[RankResult] = []
            if isinstance(record, Progress):
                results = rank_stage.progress(record)
            else:
                rank_stage.add(record)
            for result in results:
                await publish(result)
            if results or checkpointer.held >= CHECKPOINT_EVERY:
                await checkpointer.save(stream, rank_stage.snapshot())

    return rank_nodes
