"""What one agent has taken from each source partition it reads: whether it is *known caught up* on a partition,
for the caught-up grace on the Faust worker (``IdleClock``'s ``caught_up``, streams.agents.idle_rules). Faust-free.

The app's one ``Backlog`` is shared by the agents and never told of a seek, so it cannot say that: after a
rebalance (Faust seeks every partition to its committed offset), a seek to a partition's first record
(streams.agents.commit) or a seek back past records refused out of order (streams.agents.contiguity), the records
from there are about to be read again while the backlog still has the read position from before; and one agent
(the prediction) asked about progress another (the normaliser) had made. So each agent keeps a ``TakenView``:

* ``took``: a record this agent's state took (held, or covered by its checkpoint); never one it refused or
  dropped as stale, so the next offset noted is at most one past what the state holds.
* ``assign`` / ``revoke`` / ``sought``: every assignment, revocation and seek makes the partitions it concerns
  unknown again: position and end forgotten, and an end asked of the broker before it no longer accepted.
* ``ended``: the log end as the broker answered a question asked after the partition's latest seek (``mark``);
  ``seen``: an end of unknown age (a fetch's high-water), kept only once such an answer is known, and only when
  higher (a log only grows, so a higher end is at least as recent).

Caught up: assigned to this agent's worker, its next offset and its end both learnt since the latest seek, and
equal. When in doubt (nothing taken since the seek, no answer yet) it is not, and the idle timeout applies.

>>> view = TakenView(("job-events",))
>>> view.assign([("job-events", 0), ("task-events", 0)]); sorted(view.assigned)
[('job-events', 0)]
>>> asked = view.mark(); view.took(("job-events", 0), 41); view.ended(("job-events", 0), 42, asked)
True
>>> view.caught_up(("job-events", 0))
True
>>> view.sought([("job-events", 0)]); view.caught_up(("job-events", 0))  # about to be read again
False
>>> view.took(("job-events", 0), 41); view.ended(("job-events", 0), 42, asked)  # asked before the seek: not taken
False
>>> view.caught_up(("job-events", 0)), view.unknown_ends()
(False, [('job-events', 0)])
"""

from __future__ import annotations

from collections.abc import Iterable

Partition = tuple[str, int]  # (topic, partition): Faust's TP is such a tuple


def _key(tp: Partition) -> Partition:
    return (tp[0], tp[1])


class TakenView:
    """Per source partition of ``topics`` assigned here: the next offset this agent takes, and the log's end, as
    learnt since the partition's latest assignment or seek."""

    def __init__(self, topics: tuple[str, ...]) -> None:
        self.topics = topics
        self.assigned: frozenset[Partition] = frozenset()
        self._next: dict[Partition, int] = {}
        self._end: dict[Partition, int] = {}
        self._count = 0  # assignments, revocations and seeks so far (a question's ``mark``)
        self._reset: dict[Partition, int] = {}  # the count at each partition's latest one
        self._reset_all = 0  # the count at the latest one that concerned every partition

    def assign(self, partitions: Iterable[Partition]) -> None:
        """The partitions this worker holds now; all of them start unknown (Faust seeks each to its committed
        offset next)."""
        self.assigned = frozenset(_key(tp) for tp in partitions if tp[0] in self.topics)
        self.sought(None)

    def revoke(self, partitions: Iterable[Partition]) -> None:
        gone = {_key(tp) for tp in partitions}
        self.assigned = self.assigned - gone
        self.sought(gone)

    def sought(self, partitions: Iterable[Partition] | None) -> None:
        """``partitions`` (None: every one) were sought, or may have been: what was learnt of them is forgotten."""
        self._count += 1
        if partitions is None:
            self._reset_all = self._count
            self._next.clear()
            self._end.clear()
            return
        for tp in map(_key, partitions):
            self._reset[tp] = self._count
            self._next.pop(tp, None)
            self._end.pop(tp, None)

    def took(self, tp: Partition, offset: int) -> None:
        """This agent's state took the record at ``offset`` of ``tp`` (or its checkpoint covers it)."""
        self._next[_key(tp)] = offset + 1

    def mark(self) -> int:
        """Take before asking the broker for ends: ``ended`` accepts an answer only if no seek came since."""
        return self._count

    def ended(self, tp: Partition, end: int | None, asked: int) -> bool:
        """The end of ``tp`` as the broker answered a question asked at ``asked`` (``mark``); whether it was taken."""
        key = _key(tp)
        if end is None or asked < max(self._reset_all, self._reset.get(key, 0)):
            return False
        self._end[key] = max(end, self._end.get(key, end))
        return True

    def seen(self, tp: Partition, end: int | None) -> None:
        """An end of unknown age (the high-water of the latest fetch): counts once an end asked after the latest
        seek is known, and only when higher than it."""
        key = _key(tp)
        if end is not None and key in self._end:
            self._end[key] = max(end, self._end[key])

    def unknown_ends(self) -> list[Partition]:
        """The assigned partitions without an end learnt since their latest seek."""
        return [tp for tp in sorted(self.assigned) if tp not in self._end]

    def caught_up(self, *tps: Partition) -> bool:
        """Whether every one of ``tps`` is assigned here and this agent has taken its records up to the end the
        broker reported since the latest seek (False when any of that is not known)."""
        for tp in map(_key, tps):
            next_offset, end = self._next.get(tp), self._end.get(tp)
            if tp not in self.assigned or next_offset is None or end is None or next_offset != end:
                return False
        return bool(tps)
