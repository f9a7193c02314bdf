"""What is committed, and where a partition resumes: the two halves of exact recovery that Faust leaves open.

1. Offsets are committed only after every checkpoint written before them is confirmed by the broker.

An agent writes its checkpoint into a Faust table, then acks the events it covers (streams.agents.checkpoint);
Faust commits acked offsets every ``broker_commit_interval`` (2.8 s), at a rebalance and at a clean stop, and
flushes its producer first. But a table write is not sent at once: it waits in Faust's producer buffer
(``send_soon``), and the buffer's flush gives up after 0.1 s without a message leaving (``flush_atmost``), while
the message a sender task has already taken off the buffer is in neither the buffer nor aiokafka's batches
(aiokafka's flush waits only for those). A commit could therefore go ahead with the newest checkpoint still on
its way; a worker killed then restarts from the committed offset with the table rebuilt from an older
checkpoint, and the events in between are lost to its state.

``CommitSafeApp`` closes that gap: its producer keeps the future of every buffered send until the broker
acknowledges it, and its flush (the one Faust calls right before committing) waits, after Faust's own flush, for
every send buffered before the flush began (those may hold checkpoints the commit relies on; later ones cannot:
the commit's offsets were chosen before). A send that failed raises out of Faust's commit instead, so nothing is
committed after it (mode then crashes the consumer service; a failed send is not exercised in the tests). Each send
still unconfirmed when Faust's flush returned is counted in ``laggard_commit_unconfirmed_sends_total``: a send
the commit would have gone ahead without.

2. A partition with no committed offset resumes from its first record after every rebalance. Faust seeks the
partitions it is given to their committed offsets, but aiokafka seeks only where an offset above 0 was committed;
elsewhere the consumer goes on from where it had fetched. An agent forgets a partition's state when the partition
is revoked (streams.agents.checkpoint), so a worker given back a partition it had read without committing (a
ranking that had not published yet, at an eager rebalance) rebuilt that state from records after a gap: seen in
the rebalance test as a ranking that skipped the first 1,114 records of its feed and listed three nodes at once.
``CommitSafeApp``'s consumer seeks such partitions of the agents' topics to their first record, as if nothing had
been read, which is what their committed offset says.

>>> import asyncio
>>> async def demo() -> tuple[int, int]:
...     sends = UnconfirmedSends()
...     future = asyncio.get_running_loop().create_future()
...     sends.track(future)
...     before = sends.pending()
...     asyncio.get_running_loop().call_later(0.01, future.set_result, "acknowledged")
...     return len(before), await confirm(before)
>>> asyncio.run(demo())
(1, 1)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import faust
from prometheus_client import Counter

from streams.agents.seeks import notify_seeks, views_of
from streams.agents.shutdown import settle_consumer_stop

log = logging.getLogger(__name__)

UNCONFIRMED_AT_COMMIT = Counter(
    "laggard_commit_unconfirmed_sends",
    "Buffered sends (checkpoints) still unconfirmed when Faust's flush before an offset commit returned; the "
    "commit waited for each")


class UnconfirmedSends:
    """The futures of sends not yet acknowledged by the broker."""

    def __init__(self) -> None:
        self._pending: set[asyncio.Future[Any]] = set()

    def track(self, future: asyncio.Future[Any]) -> None:
        if not future.done():
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

    def pending(self) -> list[asyncio.Future[Any]]:
        return list(self._pending)


async def confirm(sends: list[asyncio.Future[Any]]) -> int:
    """Wait until every one of ``sends`` is acknowledged; how many were not yet. A failed send raises its error
    (nothing may be committed after it)."""
    waiting = [send for send in sends if not send.done()]
    await acknowledged(sends)
    return len(waiting)


async def acknowledged(sends: list[asyncio.Future[Any]]) -> None:
    """Wait until every one of ``sends`` is done; the first that failed raises its error.

    Unlike ``asyncio.gather``, a waiter cancelled meanwhile (an agent stopped at SIGTERM) leaves the sends alone:
    gather cancels them, and each cancelled send's callback in Faust (``Topic._on_published``, which catches only
    ``Exception``) then logs a ``CancelledError`` traceback, once per record in flight at every clean stop."""
    if not sends:
        return
    await asyncio.wait(sends)
    for send in sends:
        send.result()


def confirm_before_commit(producer: Any) -> Any:
    """Make ``producer`` (a Faust producer) keep every buffered send until it is acknowledged, and make its
    ``flush`` wait, after Faust's own flush, for those buffered before it began; return it."""
    sends = UnconfirmedSends()
    send_soon, flush = producer.send_soon, producer.flush

    def tracked_send_soon(future: Any) -> None:
        sends.track(future)
        send_soon(future)

    async def confirmed_flush() -> None:
        before = sends.pending()
        await flush()
        unconfirmed = await confirm(before)
        if unconfirmed:
            UNCONFIRMED_AT_COMMIT.inc(unconfirmed)
            log.debug("flush before commit: %d of %d buffered sends were still unconfirmed after Faust's flush; "
                     "waited for them", unconfirmed, len(before))

    producer.send_soon, producer.flush = tracked_send_soon, confirmed_flush
    return producer


def replay_uncommitted(consumer: Any, acked: Callable[[str], bool]) -> Any:
    """Make ``consumer`` (a Faust consumer), whenever Faust seeks to committed offsets after a rebalance, also seek
    the partitions of topics with ``acked(topic)`` that have no committed offset (none, or 0) to their first
    record; return it. The first assignment is left alone: nothing has been fetched yet, and the consumer starts
    such partitions from their first record anyway (``auto_offset_reset`` earliest)."""
    seek_to_committed = consumer.seek_to_committed
    assignments = [0]

    async def seek() -> Mapping[Any, int | None]:
        committed: Mapping[Any, int | None] = await seek_to_committed()
        assignments[0] += 1
        fresh = [tp for tp, offset in committed.items() if acked(tp.topic) and not (offset and offset > 0)]
        if fresh and assignments[0] > 1:
            await consumer.seek_wait(dict(await consumer.earliest_offsets(*fresh)))
            log.info("nothing committed on %s: they start again from their first record", sorted(map(tuple, fresh)))
        return committed

    consumer.seek_to_committed = seek
    return consumer


class CommitSafeApp(faust.App):
    """A Faust app whose producer confirms buffered sends before offsets are committed, and whose consumer
    starts partitions with nothing committed from their first record (see the module)."""

    def _new_producer(self) -> Any:
        return confirm_before_commit(super()._new_producer())

    def _new_consumer(self) -> Any:
        # Every seek, Faust's or ours, is told to the agents' views of what they took (streams.agents.seeks).
        # Its stop ends at once when the broker is gone (streams.agents.shutdown).
        consumer = settle_consumer_stop(notify_seeks(super()._new_consumer(), views_of(self)))
        return replay_uncommitted(consumer, lambda topic: bool(self.topics.acks_enabled_for(topic)))
