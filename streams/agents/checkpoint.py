"""Exact recovery for agents whose state is a core stage: one life cycle (load, hold, save, revoke) for all.

An agent iterates its stream with manual acks. Every event it processes is held, un-acked; at a checkpoint it
writes the state's snapshot together with the source offsets it covers into a Faust table, then acks the held
events. Faust flushes the producer (outputs and the table's changelog) before it commits offsets, and commits
only up to the last contiguous ack, so the committed offset never passes the last durable checkpoint. After a
crash the table is rebuilt from its changelog, Faust redelivers from the committed offset, and the agent skips
what the checkpoint already covers: the state ends exactly as in an uninterrupted run. Outputs between the last
checkpoint and the crash are produced again; they are idempotent (samples replace themselves downstream, the
ranking suppresses delta versions already published). Outputs *before* a checkpoint are not produced again, so a
checkpoint is written only once the broker has acknowledged every output it covers (``Outputs``): a send is
only queued when ``send`` returns, and a checkpoint queued after it could reach the broker first (another
partition, another batch); a worker killed in between resumed past summaries the ranking never received
(tests/integration/operations/test_kill_after_commit.py: a node's n one short, failing 2 runs in 3).

Events fetched before a rebalance are not processed after it (``PartitionStates.admit``): Faust drops them at the
stream, but a batch taken before the rebalance still holds them, and one processed after its partition's state
was forgotten rebuilt that state from the checkpoint plus a gap, then skipped the re-read events of the gap as
covered (test_rebalance.py: the final snapshot's statistics off the clean run's). Nor may a record reach a state
before one Faust skipped at a rebalance comes again (``streams.agents.contiguity``): the state takes each source
partition's records in offset order, and a partition that skips ahead is sought back.

The table value is a versioned envelope (zlib-compressed JSON, ``streams.agents.envelope``, shared with the
direct engine); another version means a cold start with a warning, never a crash.

>>> state, offsets = unpack(pack({"n": 1}, {"task-events:0": 41}))
>>> state, offsets
({'n': 1}, {'task-events:0': 41})
>>> unpack(b"not a checkpoint")
(None, {})
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import faust
from faust import streams as faust_streams
from faust.types import EventT, StreamT, TopicT
from faust.types.tuples import TP
from mode.types.signals import SignalHandlerT

from streams import metrics
from streams.agents.commit import acknowledged
from streams.agents.common import decode_or_dead_letter
from streams.agents.contiguity import Contiguity, Seek, Take
from streams.agents.envelope import ENVELOPE_FORMAT as ENVELOPE_FORMAT  # re-exported: the agents' names
from streams.agents.envelope import Stateful
from streams.agents.envelope import pack as pack
from streams.agents.envelope import unpack as unpack
from streams.agents.taken import TakenView
from streams.health import ReadProgress

log = logging.getLogger(__name__)

CheckpointTable = MutableMapping[bytes, bytes]  # a Faust table of raw bytes, or a dict in tests
RawStream = StreamT[bytes]
RawEvent = EventT[bytes]


S = TypeVar("S", bound=Stateful)
R = TypeVar("R")


def unacked_events(stream: RawStream, reader: str = "", progress: ReadProgress | None = None
                   ) -> AsyncIterator[RawEvent]:
    """An agent's events, each acknowledged only by the agent (Faust's ``noack``), each counted in
    ``laggard_events_in_total`` under ``reader`` and noted in ``progress`` (the health check's).

    Casts, narrowly: an agent is handed a ``faust.Stream`` (``StreamT`` lacks ``noack``), and Faust declares
    ``events`` as a coroutine although it is an async generator.
    """
    events = cast(AsyncIterator[RawEvent], cast(faust.Stream[bytes], stream).noack().events())
    return _observed(events, reader, progress)


async def _observed(events: AsyncIterator[RawEvent], reader: str, progress: ReadProgress | None
                    ) -> AsyncIterator[RawEvent]:
    async for event in events:
        _observe(event, reader, progress)
        yield event


def _observe(event: RawEvent, reader: str, progress: ReadProgress | None) -> None:
    message = event.message
    metrics.EVENTS_IN.labels(message.topic, reader).inc()
    if progress is not None:
        progress.read((message.topic, message.partition), message.offset, message.timestamp or time.time(),
                      time.monotonic())


def unacked_batches(stream: RawStream, max_events: int, within_s: float, reader: str = "",
                    progress: ReadProgress | None = None) -> AsyncIterator[list[RawEvent]]:
    """An agent's events in batches (up to ``max_events``, or whatever came within ``within_s``), each
    acknowledged only by the agent (Faust's ``noack_take``): one pass of the core per batch, not per event.
    Each event is counted and noted as in ``unacked_events``.

    Casts, narrowly: ``StreamT`` lacks ``noack_take``, which yields the buffered events.
    """
    batches = cast(AsyncIterator[list[RawEvent]], cast(faust.Stream[bytes], stream).noack_take(max_events, within_s))
    return _observed_batches(batches, reader, progress)


async def _observed_batches(batches: AsyncIterator[list[RawEvent]], reader: str, progress: ReadProgress | None
                            ) -> AsyncIterator[list[RawEvent]]:
    async for batch in batches:
        for event in batch:
            _observe(event, reader, progress)
        yield batch


def processed(event: RawEvent, progress: ReadProgress | None) -> None:
    """Note in ``progress`` that ``event`` was processed just now. A batch is noted as read when it is taken;
    an agent whose records each take long (the ranking catching up) notes them again as it goes, so the
    health check sees it working instead of a partition with nothing read (#18: a Google catch-up restarted
    the worker every two minutes)."""
    if progress is not None:
        message = event.message
        progress.read((message.topic, message.partition), message.offset, message.timestamp or time.time(),
                      time.monotonic())


def as_current(event: RawEvent) -> None:
    """Make ``event`` the current event of this task only: a table write goes to the changelog partition of
    its source partition (Faust reads it from a context variable). Per-event iteration sets it; a batch does
    not, so a checkpoint of a partition sets it to one of that partition's events first.

    Never through ``Stream._set_current_event``: that also sets the stream's ``current_event`` attribute,
    which ``noack_take``'s buffering task reads *after* waiting for the agent to finish a batch, so a
    checkpoint in between made it buffer the checkpoint's event a second time instead of the one it had just
    received, and that one was lost (#18: a sample short after a restart, summaries that differed from the
    in-process runner's without one).
    """
    faust_streams._current_event.set(weakref.ref(event))


def on_revoke(app: faust.App, handler: Callable[[set[TP]], Awaitable[None]]) -> None:
    """Call ``handler(revoked partitions)`` whenever partitions leave this worker.

    Casts, narrowly: mode's ``SignalHandlerT`` admits no function under mypy (not even its own example).
    """

    async def receive(sender: object, *args: set[TP], **kwargs: object) -> None:
        for revoked in args:  # Faust sends one: the set of revoked partitions
            await handler(revoked)

    app.on_partitions_revoked.connect(cast("SignalHandlerT[Any]", receive))


def source_of(event: RawEvent) -> str:
    """``topic:partition`` of a Faust event's message."""
    return source_name(event.message.topic, event.message.partition)


def source_name(topic: str, partition: int) -> str:
    """``topic:partition``: how checkpoints and contiguity name a source partition."""
    return f"{topic}:{partition}"


class Outputs:
    """The broker's acknowledgements (delivery futures) of an agent's sends not yet covered by a checkpoint.

    >>> async def demo() -> tuple[int, int]:
    ...     outputs = Outputs()
    ...     future = asyncio.get_running_loop().create_future()
    ...     outputs.track(future)
    ...     asyncio.get_running_loop().call_later(0.01, future.set_result, "acknowledged")
    ...     return await outputs.confirmed(), await outputs.confirmed()
    >>> asyncio.run(demo())
    (1, 0)
    """

    def __init__(self) -> None:
        self._pending: list[asyncio.Future[Any]] = []

    def track(self, future: asyncio.Future[Any]) -> None:
        if not future.done():
            self._pending.append(future)

    async def confirmed(self) -> int:
        """Wait until every tracked send is acknowledged (a failed one raises: no checkpoint may follow it);
        how many were waited for."""
        pending, self._pending = self._pending, []
        await acknowledged(pending)
        return len(pending)


class Checkpointer:
    """Held events, checkpoints and the skipping of already-covered offsets for one table key."""

    def __init__(self, table: CheckpointTable, key: bytes) -> None:
        self.table = table
        self.key = key
        self.offsets: dict[str, int] = {}
        self._held: list[RawEvent] = []
        self._last: RawEvent | None = None  # the last event held: its partition is the changelog's

    def load(self) -> dict[str, Any] | None:
        """The state saved under this key (None for a cold start); remembers the offsets it covers."""
        state, self.offsets = unpack(self.table.get(self.key))
        return state

    def covered(self, event: RawEvent) -> bool:
        """True when the checkpoint already includes this event (a redelivery after a restart)."""
        offset: int = event.message.offset
        return offset <= self.offsets.get(source_of(event), -1)

    def hold(self, event: RawEvent) -> None:
        self.offsets[source_of(event)] = event.message.offset
        self._held.append(event)

    async def save(self, stream: RawStream, state: Stateful, outputs: Outputs | None = None) -> None:
        """Wait for ``outputs`` to be acknowledged, write the checkpoint, then ack every held event (in this
        order: see the module docstring)."""
        if outputs is not None:
            await outputs.confirmed()
        if self._held:
            self._last = self._held[-1]
        if self._last is not None:
            as_current(self._last)
        self.table[self.key] = pack(state.snapshot(), self.offsets)
        held, self._held = self._held, []
        for event in held:
            await stream.ack(event)

    @property
    def held(self) -> int:
        return len(self._held)


@dataclass(frozen=True)
class Slot(Generic[S]):
    """One partition's state with its checkpointer."""

    partition: int
    state: S
    checkpointer: Checkpointer

    async def save(self, stream: RawStream, outputs: Outputs | None = None) -> None:
        await self.checkpointer.save(stream, self.state, outputs)


@dataclass(frozen=True)
class Admitted(Generic[S, R]):
    """A new, valid record with the slot of the partition it came from."""

    slot: Slot[S]
    record: R


OnLoad = Callable[[int, S, bool], Awaitable[None]]


class PartitionStates(Generic[S]):
    """Each source partition's state with its Checkpointer: the life cycle every agent's state goes through.

    A state is made on the partition's first event and restored from the table (a snapshot this build cannot
    read means a cold start with a warning); ``on_load(partition, state, restored)`` then runs once. It is
    forgotten when the partition is revoked, so a partition that moves to another worker and back reloads the
    checkpoint instead of resuming from what this worker held before the other one advanced it. ``key`` names
    a partition's checkpoint in the table.
    """

    def __init__(self, app: faust.App, table: CheckpointTable, make: Callable[[int], S], topics: tuple[str, ...],
                 key: Callable[[int], bytes], on_load: OnLoad[S] | None = None) -> None:
        self.app, self.table, self.make, self.topics, self.key, self.on_load = app, table, make, topics, key, on_load
        self._slots: dict[int, Slot[S]] = {}
        self.contiguity = Contiguity()
        self.taken = TakenView(topics)  # what this agent took: its caught-up grace asks (streams.agents.taken)
        on_revoke(app, self._forget_revoked)

    async def get(self, partition: int) -> Slot[S]:
        if partition not in self._slots:
            state = self.make(partition)
            checkpointer = Checkpointer(self.table, self.key(partition))
            restored = self._restore(partition, state, checkpointer.load())
            if self.on_load is not None:
                await self.on_load(partition, state, restored)
            if restored:
                log.info("%r resumes from its checkpoint at %s", checkpointer.key, checkpointer.offsets)
                # The state holds what its checkpoint covers: taken, so a job partition with nothing to re-read
                # after a restart can be caught up without waiting for its next record (streams.agents.taken).
                for source, offset in checkpointer.offsets.items():
                    topic, _, number = source.rpartition(":")
                    self.taken.took((topic, int(number)), offset)
            self._slots[partition] = Slot(partition, state, checkpointer)
        return self._slots[partition]

    def _restore(self, partition: int, state: S, saved: dict[str, Any] | None) -> bool:
        if saved is None:
            return False
        try:
            state.restore(saved)
            return True
        except ValueError as exc:
            log.warning("partition %d: %s; cold start", partition, exc)
            return False

    def slots(self) -> list[Slot[S]]:
        """The slot of every partition this worker holds now."""
        return list(self._slots.values())

    async def admit(self, stream: RawStream, event: RawEvent, dead_letters: TopicT | None,
                    expected: tuple[type[R], ...]) -> Admitted[S, R] | None:
        """The slot and record of a new event; None when the checkpoint covers it (acked here) or it was not
        a valid record (held, and dead-lettered when ``dead_letters`` is given), or it was fetched before the
        latest rebalance (neither held nor acked: the consumer delivers it again from the committed offset), or
        a record before it never reached the state (neither held nor acked: sought back to that one)."""
        if self.stale(event):
            return None
        slot = await self.get(event.message.partition)
        if slot.checkpointer.covered(event):
            self.taken.took((event.message.topic, event.message.partition), event.message.offset)
            await stream.ack(event)
            return None
        if not await self._continues(slot.checkpointer, event):
            return None
        slot.checkpointer.hold(event)
        self.taken.took((event.message.topic, event.message.partition), event.message.offset)
        record = await decode_or_dead_letter(event, dead_letters, expected)
        return None if record is None else Admitted(slot, record)

    async def _continues(self, checkpointer: Checkpointer, event: RawEvent) -> bool:
        """Whether ``event`` is the next record its state expects; if not, its partition is sought back to the one
        missing (streams.agents.contiguity) and it is neither held nor acked."""
        source, offset = source_of(event), event.message.offset
        verdict = self.contiguity.judge(source, offset, checkpointer.offsets.get(source))
        if isinstance(verdict, Take):
            return True
        if isinstance(verdict, Seek):
            if verdict.hole:
                log.warning("%s: offsets %d to %d never came after a seek back; going on without them (a log "
                            "without them: transaction markers, retention)", source,
                            checkpointer.offsets[source] + 1, verdict.offset - 1)
                checkpointer.offsets[source] = verdict.offset - 1
            else:
                log.warning("%s: offset %d came before %d (skipped at a rebalance); reading again from %d",
                            source, offset, verdict.offset, verdict.offset)
            metrics.OFFSET_SEEKS_BACK.inc()
            await self._seek(event.message.tp, verdict.offset)
        return False

    async def _seek(self, tp: TP, offset: int) -> None:
        # On the consumer's own thread (``seek_wait``): a seek from the agent's thread was overtaken by a fetch.
        try:
            await self.app.consumer.seek_wait({tp: offset})
        except Exception as exc:  # revoked meanwhile, the broker away: the next record past the gap seeks again
            log.warning("seeking %s back to %d failed (%r); trying again with its next record", tp, offset, exc)

    def stale(self, event: RawEvent) -> bool:
        """True for an event a rebalance overtook: Faust's own rule for its streams (a rebalance under way, or
        fetched in an earlier generation of the group), applied again when a batch is processed."""
        generation = event.message.generation_id
        return not self.app.flow_control.is_active() or (
            generation is not None and generation != self.app.consumer_generation_id)

    async def _forget_revoked(self, revoked: set[TP]) -> None:
        self.taken.revoke((tp.topic, tp.partition) for tp in revoked)
        for tp in revoked:
            if tp.topic in self.topics:
                self._slots.pop(tp.partition, None)
        self.contiguity.forget(source_name(tp.topic, tp.partition) for tp in revoked)
