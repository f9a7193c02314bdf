"""When a silent stream stops holding the ranking back: the wall-clock half of source idleness, Faust-free
(both worker engines use it; streams.agents.idleness runs it on Faust's timers).

The stages (streams.core.stages) wait for every stream, so their results do not depend on arrival order,
and accept a shell's word that a stream is idle. This is that word. A stream *blocks* while the others have
passed a ranking boundary it has not (a partition's job events behind its task events; a normalising
partition behind the most advanced one); once it has blocked for ``after_s`` seconds of wall-clock time
without catching up, it is declared idle. Measured from the moment it started blocking, not from its last
record: in live operation progress marks come once per ranking period, and a partition a few seconds behind
the leader at each boundary is not idle. ``after_s = 0`` never declares anything idle (strict order).

A stream with records on the broker the worker has not processed yet is *behind*, not idle (``Backlog``, fed by
the shell's consumer): a worker catching up on history (a restart after downtime, a replay of a whole trace)
reads its partitions unevenly for minutes (kafka-python fetched all of a partition's task events before one of
its job events), and declaring the slower streams idle ranked without them and lost their late results (Google
parts 0-9 through Kafka stopped at blacklist version 28 of 38). A partition assigned to the worker whose read
position or log end is not known yet counts as behind; one assigned elsewhere is not known here (False). Being
behind holds the wall-clock rule off for at most ``CATCH_UP_ALLOWANCE_S`` of one continuous block, so a stream
the consumer never reads cannot hold the ranking forever.

A stream *known caught up* is another matter (Kafka Streams' ``max.task.idle.ms`` since KIP-695): assigned here,
its next offset and its log end both known and equal, so nothing it sent is unread. Live, that is a quiet moment
of a source, and waiting the full ``after_s`` for its next record only delays the ranking (a job partition whose
next record is 132 s of event time later held a 3 s period of the live bench 1.3 s: docs/scale.md). Once it has
blocked ``grace_s`` of wall time caught up without a break it is declared idle, as a silent one after ``after_s``;
the grace covers what may be on its way: a record the producer sent with the ones that passed the boundary, and
an end learnt from a fetch before that record landed (the next fetch round tells it). ``grace_s = 0``: off.

>>> clock = iter([0.0, 10.0, 70.0, 71.0]).__next__
>>> idle = IdleClock(60.0, clock=clock)
>>> idle.overdue("p1", blocking=True), idle.overdue("p1", blocking=True), idle.overdue("p1", blocking=True)
(False, False, True)
>>> idle.overdue("p1", blocking=False), idle.blocking_since("p1")
(False, None)
>>> sending = IdleClock(60.0, clock=iter([0.0, 50.0, 70.0, 111.0, 130.0]).__next__)
>>> [sending.overdue("p1", True, sent) for sent in (1, 1, 2, 2, 2)]  # it sent at 70 s: the block starts over
[False, False, False, False, True]
>>> backlog = Backlog()
>>> backlog.assign([("job-events", 0)]); backlog.behind(("job-events", 0))  # position and end unknown yet
True
>>> backlog.start(("job-events", 0), 40); backlog.ended(("job-events", 0), 42); backlog.behind(("job-events", 0))
True
>>> backlog.processed(("job-events", 0), 41); backlog.behind(("job-events", 0)), backlog.behind(("job-events", 1))
(False, False)
>>> late = IdleClock(60.0, clock=iter([0.0, 100.0, 161.0]).__next__, behind=lambda s: True, allowance_s=150)
>>> [late.overdue("p1", blocking=True) for _ in range(3)]  # unread records: not idle, until the allowance
[False, False, True]
>>> quiet = IdleClock(60.0, clock=iter([0.0, 0.2, 0.3, 0.5, 0.6]).__next__, caught_up=lambda s: s == "p1",
...                   grace_s=0.3)
>>> [quiet.overdue("p1", blocking=True) for _ in range(3)], quiet.overdue("p2", blocking=True), quiet.why
([False, False, True], False, 'caught up')
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Hashable
from typing import Protocol

from streams.core.events import StragglerPrediction
from streams.core.prediction.stage import PredictStage
from streams.core.publication import Publication, PublishedRanking
from streams.core.stages import Emitted, NormalizeStage

log = logging.getLogger(__name__)
CATCH_UP_ALLOWANCE_S = 900.0  # one continuous block may be excused by unread records this long at most
Partition = tuple[str, int]  # (topic, partition): kafka-python's TopicPartition and Faust's TP are such tuples


class Backlog:
    """Per source partition assigned to this worker: the next offset it processes and the end of the partition's
    log on the broker, as last known; ``behind`` says whether records wait on the broker (or may: not known yet)."""

    def __init__(self) -> None:
        self.assigned: frozenset[Partition] = frozenset()
        self._start: dict[Partition, int] = {}  # where reading starts, for partitions not processed yet
        self._next: dict[Partition, int] = {}  # after the last record processed since the assignment
        self._end: dict[Partition, int] = {}

    def assign(self, partitions: Collection[Partition]) -> None:
        """The partitions this worker holds now; what it knew of others is forgotten."""
        self.assigned = frozenset((tp[0], tp[1]) for tp in partitions)
        for known in (self._start, self._next, self._end):
            for tp in [tp for tp in known if tp not in self.assigned]:
                del known[tp]

    def start(self, tp: Partition, offset: int) -> None:
        """Where reading ``tp`` starts (its sought or committed position); a later word replaces it."""
        self._start[(tp[0], tp[1])] = offset

    def processed(self, tp: Partition, offset: int) -> None:
        self._next[(tp[0], tp[1])] = offset + 1

    def ended(self, tp: Partition, end: int | None) -> None:
        """The broker's end offset (high-water) of ``tp``, when a fetch or a query told it."""
        if end is not None:
            self._end[(tp[0], tp[1])] = end

    def unknown(self) -> tuple[list[Partition], list[Partition]]:
        """The assigned partitions without a known start, and those without a known end."""
        return ([tp for tp in sorted(self.assigned) if tp not in self._next and tp not in self._start],
                [tp for tp in sorted(self.assigned) if tp not in self._end])

    def behind(self, *tps: Partition) -> bool:
        """Whether any of ``tps`` assigned here has records on the broker not processed yet (or may have)."""
        for tp in tps:
            key = (tp[0], tp[1])
            if key not in self.assigned:
                continue
            next_offset, end = self._next.get(key, self._start.get(key)), self._end.get(key)
            if next_offset is None or end is None or next_offset < end:
                return True
        return False

    def caught_up(self, *tps: Partition) -> bool:
        """Whether every one of ``tps`` is assigned here and known to have nothing unread: its next offset and its
        end both known, the one at the other. One assigned elsewhere is not known here (False), nor is one whose
        position or end this worker has not learnt yet. The end is the high-water of the partition's latest fetch
        (or query): a record the producer appended since is unread, but not known to be; what bounds that is the
        shell's fetch round, which the grace of ``IdleClock.caught_up_grace_s`` must exceed."""
        for tp in tps:
            key = (tp[0], tp[1])
            next_offset, end = self._next.get(key, self._start.get(key)), self._end.get(key)
            if key not in self.assigned or next_offset is None or end is None or next_offset < end:
                return False
        return bool(tps)


class IdleClock:
    """Per stream: since when it blocks, and whether that has lasted ``after_s`` seconds without its records
    waiting unread on the broker (``behind``: the shell's ``Backlog``; None: not known, the wall clock alone), or
    ``grace_s`` seconds while it was known caught up (``caught_up``: nothing unread; None or ``grace_s = 0``: off)."""

    def __init__(self, after_s: float, clock: Callable[[], float] = time.monotonic,
                 behind: Callable[[Hashable], bool] | None = None,
                 allowance_s: float = CATCH_UP_ALLOWANCE_S,
                 caught_up: Callable[[Hashable], bool] | None = None, grace_s: float = 0.0) -> None:
        self.after_s = after_s
        self.behind = behind
        self.allowance_s = allowance_s
        self.caught_up = caught_up if grace_s > 0 else None
        self.grace_s = grace_s
        self.why = ""  # why the last stream declared idle was: "caught up" or "timeout"
        self.told: set[Hashable] = set()  # streams whose release by the grace was logged (once: it is routine)
        self._clock = clock
        self._since: dict[Hashable, float] = {}  # since when the wall-clock rule runs
        self._first: dict[Hashable, float] = {}  # since when the stream blocks, behind or not
        self._sent: dict[Hashable, Hashable] = {}  # what the stream had sent when its block (re)started
        self._quiet: dict[Hashable, float] = {}  # since when a blocking stream is known caught up, without a break
        self._checked = 0.0  # the clock at the latest check
        self.on_grace: Callable[[], None] | None = None  # called as a grace starts (a shell's timer wakes for its end)

    def overdue(self, stream: Hashable, blocking: bool, sent: Hashable = None) -> bool:
        """Record whether ``stream`` blocks now; True once it has blocked for ``after_s`` (then it starts over)
        while not behind (unread records start the wall clock over, for ``allowance_s`` of one block at most),
        or for ``grace_s`` while known caught up (any check that finds it not so starts the grace over).
        ``sent``, when given, counts what the stream sent so far: a change means it is not silent, and its
        block starts over from now (a job stream that keeps sending may still lag behind the task events)."""
        if not blocking or self.after_s <= 0:
            self._forget(stream)
            return False
        if sent is not None and self._sent.setdefault(stream, sent) != sent:
            self._forget(stream)
            self._sent[stream] = sent
        now = self._checked = self._clock()
        first = self._first.setdefault(stream, now)
        if self.caught_up is not None and self.caught_up(stream):
            if stream not in self._quiet:
                self._quiet[stream] = now
                if self.on_grace is not None:
                    self.on_grace()
            if now - self._quiet[stream] >= self.grace_s:
                return self._declare(stream, "caught up")
        else:
            self._quiet.pop(stream, None)
        if self.behind is not None and now - first < self.allowance_s and self.behind(stream):
            self._since[stream] = now
            return False
        since = self._since.setdefault(stream, now)
        if now - since < self.after_s:
            return False
        return self._declare(stream, "timeout")

    def _declare(self, stream: Hashable, why: str) -> bool:
        sent = self._sent.get(stream)
        self._forget(stream)
        if sent is not None:  # what it sent stays the mark a change is seen against
            self._sent[stream] = sent
        self.why = why
        return True

    def _forget(self, stream: Hashable) -> None:
        for known in (self._since, self._first, self._sent, self._quiet):
            known.pop(stream, None)

    def due(self) -> float | None:
        """When (on ``clock``) a check may next declare a stream idle by its grace, for the direct engine's poll: the
        end of the earliest running grace; while a stream blocks without being known caught up, a quarter grace after
        the latest check (what makes it caught up is mostly a record processed, which checks by itself; not always:
        a position or an end learnt from the broker). None: no grace runs or may start."""
        if self.caught_up is None or not self._first:
            return None
        ends = self.grace_ends()
        due = math.inf if ends is None else ends
        if len(self._quiet) < len(self._first):
            due = min(due, self._checked + self.grace_s / 4)
        return due

    def grace_ends(self) -> float | None:
        """When (on ``clock``) the earliest running grace ends; None when none runs. Unlike ``due``, nothing while
        streams block without being known caught up: a shell that learns by other means when that changes (the
        Faust worker: ``on_grace``, and the ends it asks) need not check every quarter grace."""
        if self.caught_up is None or not self._quiet:
            return None
        return min(since + self.grace_s for since in self._quiet.values())

    def blocking_since(self, stream: Hashable) -> float | None:
        return self._since.get(stream)

    def clear(self) -> None:
        for known in (self._since, self._first, self._sent, self._quiet):
            known.clear()


def earliest_due(*clocks: IdleClock) -> float:
    """When the earliest grace of ``clocks`` ends (``IdleClock.due``); inf when none runs."""
    return min((due for due in (clock.due() for clock in clocks) if due is not None), default=math.inf)


class WaitsForJobEvents(Protocol):
    """A stage that holds task events until its partition's job stream passes their time (``NormalizeStage``,
    ``PredictStage``)."""

    @property
    def partition(self) -> int: ...
    @property
    def holds_progress(self) -> bool: ...
    @property
    def job_stream_lag_us(self) -> int: ...
    @property
    def pending(self) -> int: ...


def job_stream_overdue(idle: IdleClock, stage: WaitsForJobEvents, held: str, sent: Hashable = None) -> bool:
    """Whether ``stage``'s job stream has held ``held`` back too long (a warning says so when it has); ``sent``:
    the job events received so far, when a job event ends the block (``IdleClock.overdue``)."""
    if not idle.overdue(stage.partition, stage.holds_progress, sent):
        return False
    if idle.why == "caught up":  # the usual live case (a job stream quiet for a moment): said once, no warning
        log.log(logging.DEBUG if stage.partition in idle.told else logging.INFO,
                "partition %d: job-events read to their end and silent for %.2f s; not waited for, to let %s, "
                "until their next event (LAGGARD_CAUGHT_UP_GRACE_S; said once)", stage.partition, idle.grace_s, held)
        idle.told.add(stage.partition)
        return True
    log.warning("partition %d: no job event let %s for %.0f s; they no longer wait for job-events until the "
                "next one (LAGGARD_IDLE_STREAM_TIMEOUT_S)", stage.partition, held, idle.after_s)
    return True


def release_job_stream_if_idle(idle: IdleClock, stage: NormalizeStage) -> Emitted:
    """What a normalising partition releases once its job stream has held its task events back too long."""
    if not job_stream_overdue(idle, stage, "task events pass a ranking boundary"):
        return Emitted([], [], None)
    return stage.mark_job_stream_idle()


def release_predictions_if_idle(idle: IdleClock, stage: PredictStage) -> list[StragglerPrediction]:
    """The flags a predicting partition raises once its job stream has held its task events back too long.

    Timed from when a task event first waits or from the latest job event, whichever came later: live, task
    events wait behind the job stream almost all the time (job events come only as jobs start and end), and a
    job stream that keeps sending is late, not silent (timed from the first wait alone, it was declared idle
    about once a minute, 2-20 s after a job event). So behind a silent job stream a flag waits ``idle.after_s``
    (and up to a quarter of it more, between the shell's timer ticks when no record comes); behind a job stream
    with records unread on the broker (a catch-up), as long as they stay unread, ``allowance_s`` at most."""
    if not job_stream_overdue(idle, stage, "task events be predicted on", stage.job_events):
        return []
    return stage.mark_job_stream_idle()


def warn_if_flags_may_never_come(idle_stream_timeout_s: float, wait_for_job_events: bool) -> None:
    """Say at start-up what a strict order costs prediction: task events wait for the job stream to pass their
    time, and ``LAGGARD_IDLE_STREAM_TIMEOUT_S=0`` never declares a silent one idle, so a partition whose job
    events stop (or a source with none) gets no prediction at all. A valid choice where job events keep coming,
    hence a warning, not a refusal."""
    if idle_stream_timeout_s <= 0 and wait_for_job_events:
        log.warning("LAGGARD_IDLE_STREAM_TIMEOUT_S=0 with LAGGARD_WAIT_FOR_JOB_EVENTS=true: a flag waits until its "
                    "partition's next job event, and a partition whose job stream is silent gets none")


def warn_once_if_waiting(stage: WaitsForJobEvents, job_idle_timeout_us: int, warned: set[int]) -> None:
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
        if idle.overdue(partition, partition in behind):  # no grace here: the ranking's clocks are not given one
            log.warning("normalising partition %d has not passed the latest ranking boundary for %.0f s; ranking "
                        "without it until it reports (LAGGARD_IDLE_STREAM_TIMEOUT_S)", partition, idle.after_s)
            out += ranking.mark_idle(partition)
    return out
