"""Source idleness on Faust: the rules of streams.agents.idle_rules run on the app's timers and revocations."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import cast

import faust
from faust.exceptions import NotReady
from faust.types.tuples import TP

from streams.agents.checkpoint import on_revoke
from streams.agents.idle_rules import Backlog
from streams.agents.idle_rules import IdleClock as IdleClock  # re-exported
from streams.agents.idle_rules import rank_without_idle as rank_without_idle  # re-exported
from streams.agents.idle_rules import release_job_stream_if_idle as release_job_stream_if_idle
from streams.agents.idle_rules import release_predictions_if_idle as release_predictions_if_idle
from streams.agents.idle_rules import warn_if_flags_may_never_come as warn_if_flags_may_never_come
from streams.agents.idle_rules import warn_once_if_waiting as warn_once_if_waiting
from streams.serde.topics import JOB_EVENTS, RANKING_FEED, TASK_EVENTS

log = logging.getLogger(__name__)
INPUTS = (TASK_EVENTS.name, JOB_EVENTS.name, RANKING_FEED.name)
GRACE_TICK_S = 0.02  # how late a caught-up stream's grace may end on Faust, at most (a check, most turns)
BACKLOG_ATTRIBUTE = "_laggard_backlog"  # the app's one Backlog, kept on the app (it lives as long as the app)


def backlog_of(app: faust.App, every_s: float, grace_s: float = 0.0) -> Backlog:
    """The worker's one ``Backlog`` of its input topics (the agents share it: the ranking asks about the partitions
    the normaliser reads); the agents note what they processed, a timer of its own (every ``every_s / 4``
    seconds, none when idleness is off; every 0.5 s with a caught-up grace, which needs the assignment early)
    asks the consumer the rest.

    Where a partition not processed yet starts is Faust's committed offset, where the assignment sought it
    (``_committed_offset``, faust-streaming 0.15: Faust's read offset runs ahead of what its buffers and an
    agent's batch hold); where it ends, the fetches' high-water, or the broker's end offsets before any fetch.
    """
    backlog: Backlog | None = getattr(app, BACKLOG_ATTRIBUTE, None)
    if backlog is not None:
        return backlog
    backlog = Backlog()
    setattr(app, BACKLOG_ATTRIBUTE, backlog)

    async def refresh() -> None:
        if app.should_stop:
            return
        try:
            consumer = app.consumer
            assigned = [tp for tp in consumer.assignment() if tp.topic in INPUTS]
            backlog.assign(assigned)
            committed = getattr(consumer, "_committed_offset", {})
            for tp in assigned:
                backlog.start(tp, committed.get(tp) or 0)
                backlog.ended(tp, consumer.highwater(tp))
            _, ends = backlog.unknown()
            if ends:
                found = await consumer.highwaters(*(TP(topic, partition) for topic, partition in ends))
                for tp, end in found.items():
                    backlog.ended(tp, end)
        except Exception as exc:  # not started, stopping, the broker away: unknown stays behind (bounded)
            log.debug("backlog refresh failed: %r", exc)

    if every_s > 0:
        app.timer(interval=0.5 if grace_s > 0 else max(0.5, every_s / 4), name="refresh_backlog")(refresh)
    return backlog


def caught_up_of(app: faust.App, backlog: Backlog, topic: str) -> Callable[[Hashable], bool]:
    """``IdleClock``'s ``caught_up`` for partition ``p`` of ``topic``: read to the end the consumer's latest fetch
    saw. That end is asked at each check (the backlog's own timer learns it only every quarter idle timeout, and
    records fetched since are not unread to it): aiokafka keeps each partition's high-water from its fetches."""

    def caught_up(partition: Hashable) -> bool:
        tp = (topic, cast(int, partition))
        try:
            backlog.ended(tp, app.consumer.highwater(TP(*tp)))
        except Exception as exc:  # not started, stopping: what the backlog knew stands
            log.debug("high-water of %s unknown: %r", tp, exc)
        return backlog.caught_up(tp)

    return caught_up


def idle_timer(app: faust.App, idle: IdleClock, lock: asyncio.Lock, name: str,
               work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work`` under ``lock`` four times per idle timeout (not at all when idleness is off).

    Records re-check idleness as they come; when they stop altogether only a timer would. The tick stands down
    while the agent holds the lock (it checks itself) or the worker stops (its producer may be gone: a
    ``NotReady`` then defers the work to the next start). Faust lets only stream iteration write tables, so
    ``work`` must not checkpoint; the agent's next record does.
    """
    if idle.after_s <= 0:
        return

    async def tick() -> None:
        if lock.locked() or app.should_stop:
            return
        async with lock:
            try:
                await work()
            except NotReady:
                log.info("%s deferred: the worker is stopping", name)

    app.timer(interval=max(0.5, idle.after_s / 4), name=name)(tick)
    if idle.caught_up is None:
        return

    async def grace_ended() -> None:  # Faust's timers run at fixed intervals: a short one, working when due
        due = idle.due()
        if due is not None and time.monotonic() >= due:
            await tick()

    app.timer(interval=GRACE_TICK_S, name=f"{name}_caught_up")(grace_ended)


def clear_on_revoke(app: faust.App, idle: IdleClock, topics: tuple[str, ...]) -> None:
    """Forget every wait when a partition of ``topics`` leaves this worker: one that comes back starts anew."""

    async def forget(revoked: set[TP]) -> None:
        if any(tp.topic in topics for tp in revoked):
            idle.clear()

    on_revoke(app, forget)
