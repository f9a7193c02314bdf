"""Whether an event continues what a partition's state holds, and what to do when it skips ahead.

A state is exact only if it took every record of its source partitions in offset order. Faust skips records at a
rebalance (the stream drops what arrives while its flow control is off or from an older generation, and the
agents skip what a batch held from before: ``PartitionStates.stale``), counting on the seek to committed offsets
at the end of the rebalance to deliver them again. But records fetched before that seek may still be processed
after the flow resumed, so a later record can reach the state before the skipped one comes again: the state then
held offset 837 without 836, and when 836 came it counted as covered (at or below the last held offset) and was
acknowledged unprocessed. Faust then committed past it too: its commit allows one unacknowledged record at the
head of a partition. Seen in the rebalance test as a ranking without one of its summaries (3-4 samples fewer per
node in 12 windows; 1 run in 6 under load), and in the kill test as a node's n one short.

So an event past the next expected offset is refused (neither held nor acknowledged) and the partition is sought
back to the missing offset; the records from there come again in order. A seek can be overtaken by records Faust
fetched before it (they move its read position past the sought one, and it then drops the records fetched again:
seen once in ten rebalance runs), so while only later records come the seek is repeated every ``reseek_s``. A log
can truly lack offsets (a transactional producer's commit markers, retention past a checkpoint): when only later
records keep coming for ``patience_s``, the hole is accepted and reading resumes from the lowest record refused.

>>> clock = iter([0.0, 1.0, 2.0, 3.0, 9.0, 40.0]).__next__
>>> gaps = Contiguity(patience_s=30.0, reseek_s=5.0, clock=clock)
>>> gaps.judge("t:0", 5, last=4)  # the next record
Take()
>>> gaps.judge("t:0", 7, last=5)  # 6 was skipped: refuse 7, read again from 6
Seek(offset=6, hole=False)
>>> gaps.judge("t:0", 8, last=5)  # a record fetched before the seek
Wait()
>>> gaps.judge("t:0", 6, last=5)  # the skipped record, delivered again
Take()
>>> [gaps.judge("t:1", 3, last=1) for _ in range(4)]  # 2 never comes: sought again after 5 s, a hole after 30
[Seek(offset=2, hole=False), Wait(), Seek(offset=2, hole=False), Seek(offset=3, hole=True)]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

GAP_PATIENCE_S = 30.0  # wall-clock seconds a sought-back partition may deliver only later records before a hole
RESEEK_S = 5.0  # while only later records come, the seek is repeated this often


class Take(NamedTuple):
    """The event continues the state: hold and process it."""


class Wait(NamedTuple):
    """Refuse the event: the partition was sought back, and it comes again after the missing one."""


class Seek(NamedTuple):
    """Refuse the event and seek its partition to ``offset``; ``hole``: the log lacks the offsets before it
    (down to the expected one), and the state goes on from ``offset``."""

    offset: int
    hole: bool


Verdict = Take | Wait | Seek


@dataclass
class _Rewind:
    target: int  # the offset sought back to
    since: float  # when first
    sought: float  # when last
    lowest: int  # the lowest offset refused since


class Contiguity:
    """Per source partition (``topic:partition``): the seeks back in progress."""

    def __init__(self, patience_s: float = GAP_PATIENCE_S, reseek_s: float = RESEEK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.patience_s = patience_s
        self.reseek_s = reseek_s
        self._clock = clock
        self._rewinds: dict[str, _Rewind] = {}

    def judge(self, source: str, offset: int, last: int | None) -> Verdict:
        """What to do with the event at ``offset`` of ``source`` when the state holds up to ``last`` (None:
        nothing known, the first record is taken as it comes). Events at or below ``last`` are the caller's
        (covered)."""
        if last is None or offset <= last + 1:
            self._rewinds.pop(source, None)
            return Take()
        expected, now = last + 1, self._clock()
        rewind = self._rewinds.get(source)
        if rewind is None or rewind.target != expected:
            self._rewinds[source] = _Rewind(expected, now, now, offset)
            return Seek(expected, hole=False)
        rewind.lowest = min(rewind.lowest, offset)
        if now - rewind.since >= self.patience_s:
            del self._rewinds[source]
            return Seek(rewind.lowest, hole=True)
        if now - rewind.sought >= self.reseek_s:
            rewind.sought = now
            return Seek(expected, hole=False)
        return Wait()

    def forget(self, sources: Iterable[str]) -> None:
        """Drop the seeks back of partitions that left this worker."""
        for source in sources:
            self._rewinds.pop(source, None)
