"""Source idleness on Faust: the rules of streams.agents.idle_rules run on the app's timers and revocations."""

from __future__ import annotations

import asyncio
import contextlib
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
from streams.agents.seeks import watch
from streams.agents.taken import TakenView
from streams.serde.topics import JOB_EVENTS, RANKING_FEED, TASK_EVENTS
from streams.settings import Settings

log = logging.getLogger(__name__)
INPUTS = (TASK_EVENTS.name, JOB_EVENTS.name, RANKING_FEED.name)
BACKLOG_ATTRIBUTE = "_laggard_backlog"  # the app's one Backlog, kept on the app (it lives as long as the app)
GRACE_MIN_SLEEP_S = 0.02  # the grace loop's sleep floor: how late a due grace the agent's lock put off may end
ENDS_EVERY_S = 0.5  # how often the ends a seek made unknown are asked of the broker


def backlog_of(app: faust.App, every_s: float) -> Backlog:
    """The worker's one ``Backlog`` of its input topics (the agents share it: the ranking asks about the partitions
    the normaliser reads); the agents note what they processed, a timer of its own (every ``every_s / 4``
    seconds, none when idleness is off) asks the consumer the rest. It says whether a stream is *behind* only
    (it hears of no seek): the caught-up grace asks each agent's own view (``caught_up_of``).

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
        app.timer(interval=max(0.5, every_s / 4), name="refresh_backlog")(refresh)
    return backlog


class ViewCaughtUp:
    """``IdleClock``'s ``caught_up`` for the partitions of ``topic``, from an agent's own ``view``; ``on_end``, when
    set, is called whenever an end is learnt from the broker (the grace's loop then checks at once)."""

    def __init__(self, app: faust.App, view: TakenView, topic: str) -> None:
        self.app, self.view, self.topic = app, view, topic
        self.on_end: Callable[[], None] | None = None
        self._asking: asyncio.Future[None] | None = None

    async def ask_ends_soon(self) -> None:
        """The timer's step: ``ask_ends`` in a future of the app's own (stopped with it), one at a time. Awaited
        here, a worker's first ask (~1 s: the client fetches metadata) overran the 0.5 s timer, and Faust warned
        "Timer ... is overlapping" for each agent at every start."""
        if self._asking is None or self._asking.done():
            self._asking = self.app.add_future(self.ask_ends())

    async def ask_ends(self) -> None:
        """Ask the broker the ends a seek made unknown."""
        unknown = [tp for tp in self.view.unknown_ends() if tp[0] == self.topic]  # the grace asks this topic only
        if self.app.should_stop or not unknown:
            return
        asked = self.view.mark()
        try:
            found = await self.app.consumer.highwaters(*(TP(*tp) for tp in unknown))
        except Exception as exc:  # not started, stopping, the broker away: unknown, the idle timeout applies
            log.debug("end offsets of %s unknown: %r", unknown, exc)
            return
        learnt = [self.view.ended((tp.topic, tp.partition), end, asked) for tp, end in found.items()]
        if any(learnt) and self.on_end is not None:
            self.on_end()

    def __call__(self, partition: Hashable) -> bool:
        tp = (self.topic, cast(int, partition))
        try:
            self.view.seen(tp, self.app.consumer.highwater(TP(*tp)))
        except Exception as exc:  # not started, not assigned, stopping: what the view knew stands
            log.debug("high-water of %s unknown: %r", tp, exc)
        return self.view.caught_up(tp)


def caught_up_of(app: faust.App, view: TakenView, topic: str, settings: Settings, name: str
                 ) -> ViewCaughtUp | None:
    """``IdleClock``'s ``caught_up`` for partition ``p`` of ``topic``, from the agent ``name``'s own ``view`` (None
    when the grace or idleness is off). The view hears of the app's assignments and seeks from here on; the ends a
    seek made unknown are asked of the broker on a timer, and a fetch's high-water, read at each check, keeps them
    current (aiokafka keeps it from each fetch; the view takes it only if higher than an end asked since the seek)."""
    if settings.caught_up_grace_s <= 0 or settings.idle_stream_timeout_s <= 0:
        return None
    watch(app, view)
    caught_up = ViewCaughtUp(app, view, topic)
    app.timer(interval=ENDS_EVERY_S, name=f"{name}_asks_ends")(caught_up.ask_ends_soon)
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
    if idle.caught_up is not None:
        app.task(grace_loop(app, idle, tick), traced=False)


def grace_loop(app: faust.App, idle: IdleClock, tick: Callable[[], Awaitable[None]]
               ) -> Callable[[], Awaitable[None]]:
    """A task that runs ``tick`` when a caught-up stream's grace ends (``IdleClock.grace_ends``), and once right
    after an end is learnt from the broker (``ViewCaughtUp.on_end``: what may make a blocking stream caught up
    without a record processed, which checks by itself). Faust's timers run at fixed intervals, so one short
    enough for the grace would wake the loop all the time. This sleeps until the running grace ends, or until a
    grace starts (``IdleClock.on_grace``) or an end is learnt; when nothing wakes it, it looks again at the idle
    timer's cadence (``idle.after_s / 4``), and the idle timeout is checked by that timer alone, as before."""

    async def loop() -> None:
        wake = asyncio.Event()
        learnt = False

        def on_end() -> None:
            nonlocal learnt
            learnt = True
            wake.set()

        idle.on_grace = wake.set
        if isinstance(idle.caught_up, ViewCaughtUp):
            idle.caught_up.on_end = on_end
        every_s = max(0.5, idle.after_s / 4)
        while not app.should_stop:
            wake.clear()  # before the tick: what happens during it wakes the next wait at once
            ends = idle.grace_ends()
            if learnt or (ends is not None and time.monotonic() >= ends):
                learnt = False
                await tick()  # stands down while the agent holds the lock: it checks by itself
                ends = idle.grace_ends()
                if app.should_stop:
                    return
            wait = every_s if ends is None else min(every_s, ends - time.monotonic())
            with contextlib.suppress(TimeoutError):  # nothing woke it: look again
                await asyncio.wait_for(wake.wait(), max(GRACE_MIN_SLEEP_S, wait))

    return loop


def clear_on_revoke(app: faust.App, idle: IdleClock, topics: tuple[str, ...]) -> None:
    """Forget every wait when a partition of ``topics`` leaves this worker: one that comes back starts anew."""

    async def forget(revoked: set[TP]) -> None:
        if any(tp.topic in topics for tp in revoked):
            idle.clear()

    on_revoke(app, forget)
