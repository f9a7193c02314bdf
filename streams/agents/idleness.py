"""Source idleness on Faust: the rules of streams.agents.idle_rules run on the app's timers and revocations."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import faust
from faust.exceptions import NotReady
from faust.types.tuples import TP

from streams.agents.checkpoint import on_revoke
from streams.agents.idle_rules import IdleClock as IdleClock  # re-exported
from streams.agents.idle_rules import rank_without_idle as rank_without_idle  # re-exported
from streams.agents.idle_rules import release_job_stream_if_idle as release_job_stream_if_idle
from streams.agents.idle_rules import warn_once_if_waiting as warn_once_if_waiting

log = logging.getLogger(__name__)


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


def clear_on_revoke(app: faust.App, idle: IdleClock, topics: tuple[str, ...]) -> None:
    """Forget every wait when a partition of ``topics`` leaves this worker: one that comes back starts anew."""

    async def forget(revoked: set[TP]) -> None:
        if any(tp.topic in topics for tp in revoked):
            idle.clear()

    on_revoke(app, forget)
