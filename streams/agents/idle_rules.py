"""When a silent stream stops holding the ranking back: the wall-clock half of source idleness, Faust-free
(both worker engines use it; streams.agents.idleness runs it on Faust's timers).

The stages (streams.core.stages) wait for every stream, so their results do not depend on arrival order,
and accept a shell's word that a stream is idle. This is that word. A stream *blocks* while the others have
passed a ranking boundary it has not (a partition's job events behind its task events; a normalising
partition behind the most advanced one); once it has blocked for ``after_s`` seconds of wall-clock time
without catching up, it is declared idle. Measured from the moment it started blocking, not from its last
record: in live operation progress marks come once per ranking period, and a partition a few seconds behind
the leader at each boundary is not idle. ``after_s = 0`` never declares anything idle (strict order).

>>> clock = iter([0.0, 10.0, 70.0, 71.0]).__next__
>>> idle = IdleClock(60.0, clock=clock)
>>> idle.overdue("p1", blocking=True), idle.overdue("p1", blocking=True), idle.overdue("p1", blocking=True)
(False, False, True)
>>> idle.overdue("p1", blocking=False), idle.blocking_since("p1")
(False, None)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

from streams.core.publication import Publication, PublishedRanking
from streams.core.stages import Emitted, NormalizeStage

log = logging.getLogger(__name__)


class IdleClock:
    """Per stream: since when it blocks, and whether that has lasted ``after_s`` seconds."""

    def __init__(self, after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.after_s = after_s
        self._clock = clock
        self._since: dict[Hashable, float] = {}

    def overdue(self, stream: Hashable, blocking: bool) -> bool:
        """Record whether ``stream`` blocks now; True once it has blocked for ``after_s`` (then it starts over)."""
        if not blocking or self.after_s <= 0:
            self._since.pop(stream, None)
            return False
        now = self._clock()
        since = self._since.setdefault(stream, now)
        if now - since < self.after_s:
            return False
        del self._since[stream]
        return True

    def blocking_since(self, stream: Hashable) -> float | None:
        return self._since.get(stream)

    def clear(self) -> None:
        self._since.clear()


def release_job_stream_if_idle(idle: IdleClock, stage: NormalizeStage) -> Emitted:
    """What a normalising partition releases once its job stream has held its task events back too long."""
    if not idle.overdue(stage.partition, stage.holds_progress):
        return Emitted([], [], None)
    log.warning("partition %d: no job event let task events pass a ranking boundary for %.0f s; they no "
                "longer wait for job-events until the next one (LAGGARD_IDLE_STREAM_TIMEOUT_S)",
                stage.partition, idle.after_s)
    return stage.mark_job_stream_idle()


def warn_once_if_waiting(stage: NormalizeStage, job_idle_timeout_us: int, warned: set[int]) -> None:
    """One warning per partition whose task events wait for job events longer than the job idle timeout."""
    if stage.job_stream_lag_us <= job_idle_timeout_us or stage.partition in warned:
        return
    warned.add(stage.partition)
    log.warning("partition %d: task events are %.0f s of event time ahead of job-events and wait for them (%d "
                "held); if this source publishes no job events, set LAGGARD_WAIT_FOR_JOB_EVENTS=false",
                stage.partition, stage.job_stream_lag_us / 1e6, stage.pending)


def rank_without_idle(idle: IdleClock, ranking: PublishedRanking) -> list[Publication]:
    """What the ranking publishes once normalising partitions that held it back too long are ranked without."""
    behind = set(ranking.stage.holding_back())
    out: list[Publication] = []
    for partition in range(ranking.stage.partitions):
        if idle.overdue(partition, partition in behind):
            log.warning("normalising partition %d has not passed the latest ranking boundary for %.0f s; "
                        "ranking without it until it reports (LAGGARD_IDLE_STREAM_TIMEOUT_S)", partition, idle.after_s)
            out += ranking.mark_idle(partition)
    return out
