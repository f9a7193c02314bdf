"""Exact recovery for agents whose state is a core stage: checkpoints in a changelog-backed Faust table.

An agent iterates its stream with manual acks. Every event it processes is held, un-acked; at a checkpoint it
writes the stage's snapshot together with the source offsets it covers into a Faust table, then acks the held
events. Faust flushes the producer (outputs and the table's changelog) before it commits offsets, and commits
only up to the last contiguous ack, so the committed offset never passes the last durable checkpoint. After a
crash the table is rebuilt from its changelog, Faust redelivers from the committed offset, and the agent skips
what the checkpoint already covers: the state ends exactly as in an uninterrupted run. Outputs between the last
checkpoint and the crash are produced again; they are idempotent (samples replace themselves downstream, the
ranking suppresses delta versions already published).

The table value is a versioned envelope (zlib-compressed JSON); another version means a cold start with a
warning, never a crash.
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

import orjson

log = logging.getLogger(__name__)
ENVELOPE_FORMAT = 1


def pack(state: dict[str, Any], offsets: dict[str, int]) -> bytes:
    return zlib.compress(orjson.dumps({"format": ENVELOPE_FORMAT, "offsets": offsets, "state": state}), 3)


def unpack(data: bytes | None) -> tuple[dict[str, Any] | None, dict[str, int]]:
    """(state, offsets) from a table value; (None, {}) for nothing or an envelope this version cannot read."""
    if not data:
        return None, {}
    try:
        envelope = orjson.loads(zlib.decompress(data))
    except (zlib.error, orjson.JSONDecodeError) as exc:
        log.warning("checkpoint unreadable (%s): cold start", exc)
        return None, {}
    if envelope.get("format") != ENVELOPE_FORMAT:
        log.warning("checkpoint format %r, expected %r: cold start", envelope.get("format"), ENVELOPE_FORMAT)
        return None, {}
    return envelope["state"], {str(k): int(v) for k, v in envelope["offsets"].items()}


def source_of(event: Any) -> str:
    """``topic:partition`` of a Faust event's message."""
    return f"{event.message.topic}:{event.message.partition}"


class Checkpointer:
    """Held events, checkpoints and the skipping of already-covered offsets for one table key."""

    def __init__(self, table: Any, key: bytes) -> None:
        self.table = table
        self.key = key
        self.offsets: dict[str, int] = {}
        self._held: list[Any] = []

    def load(self) -> dict[str, Any] | None:
        """The state saved under this key (None for a cold start); remembers the offsets it covers."""
        state, self.offsets = unpack(self.table.get(self.key))
        return state

    def covered(self, event: Any) -> bool:
        """True when the checkpoint already includes this event (a redelivery after a restart)."""
        return event.message.offset <= self.offsets.get(source_of(event), -1)

    def hold(self, event: Any) -> None:
        self.offsets[source_of(event)] = event.message.offset
        self._held.append(event)

    async def save(self, stream: Any, state: dict[str, Any]) -> None:
        """Write the checkpoint, then ack every held event (in this order: see the module docstring)."""
        self.table[self.key] = pack(state, self.offsets)
        held, self._held = self._held, []
        for event in held:
            await stream.ack(event)

    @property
    def held(self) -> int:
        return len(self._held)


class PartitionStates:
    """Each source partition's state object with its Checkpointer, for agents keyed by partition.

    A state is made on the partition's first event and restored from the table (a snapshot this build cannot
    read means a cold start with a warning); it is forgotten when the partition is revoked, so a partition that
    moves to another worker and back reloads the checkpoint instead of resuming from what this worker held
    before the other one advanced it.
    """

    def __init__(self, app: Any, table: Any, name: str, make: Any, topics: tuple[str, ...]) -> None:
        self.table, self.name, self.make, self.topics = table, name, make, topics
        self._states: dict[int, tuple[Any, Checkpointer]] = {}
        app.on_partitions_revoked.connect(self._forget_revoked)

    def get(self, partition: int) -> tuple[Any, Checkpointer]:
        if partition not in self._states:
            state = self.make(partition)
            checkpointer = Checkpointer(self.table, f"{self.name}:{partition}".encode())
            saved = checkpointer.load()
            if saved is not None:
                try:
                    state.restore(saved)
                    log.info("%s partition %d resumes from its checkpoint at %s", self.name, partition,
                             checkpointer.offsets)
                except ValueError as exc:
                    log.warning("%s partition %d: %s; cold start", self.name, partition, exc)
            self._states[partition] = (state, checkpointer)
        return self._states[partition]

    def items(self) -> list[tuple[int, Any, Checkpointer]]:
        """(partition, state, checkpointer) of every partition this worker holds now."""
        return [(partition, state, checkpointer) for partition, (state, checkpointer) in self._states.items()]

    async def admit(self, stream: Any, event: Any, dead_letters: Any, expected: tuple[type, ...]) -> Any:
        """(state, checkpointer, record) for a new event; None when the checkpoint covers it (acked here)
        or it was not a valid record (held, and dead-lettered when ``dead_letters`` is given)."""
        from streams.agents.common import decode_or_dead_letter

        state, checkpointer = self.get(event.message.partition)
        if checkpointer.covered(event):
            await stream.ack(event)
            return None
        checkpointer.hold(event)
        record = await decode_or_dead_letter(event, dead_letters, expected)
        return None if record is None else (state, checkpointer, record)

    async def _forget_revoked(self, sender: Any, revoked: Any, **kwargs: Any) -> None:
        for tp in revoked:
            if tp.topic in self.topics:
                self._states.pop(tp.partition, None)
