"""The checkpoint envelope both worker engines write: a stage's state with the source offsets it covers.

Faust-free, so the direct engine (streams.engine) reads and writes the same envelope as the Faust agents
(streams.agents.checkpoint) without importing Faust. A versioned, zlib-compressed JSON document; another
version means a cold start with a warning, never a crash.

>>> state, offsets = unpack(pack({"n": 1}, {"task-events:0": 41}))
>>> state, offsets
({'n': 1}, {'task-events:0': 41})
>>> unpack(b"not a checkpoint")
(None, {})
"""

from __future__ import annotations

import logging
import zlib
from typing import Any, Protocol

import orjson

from streams.errors import CheckpointTooLarge

log = logging.getLogger(__name__)
ENVELOPE_FORMAT = 1
CHECKPOINT_MAX_BYTES = 32 * 1024 * 1024  # a checkpoint is one record: the checkpoint topics' max.message.bytes


class Stateful(Protocol):
    """A core state with an explicit life cycle: plain JSON-able snapshot, and restore (ValueError: cold)."""

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...


def pack(state: dict[str, Any], offsets: dict[str, int]) -> bytes:
    """The envelope's bytes; CheckpointTooLarge past ``CHECKPOINT_MAX_BYTES`` (the broker would refuse the record
    at every try)."""
    packed = zlib.compress(orjson.dumps({"format": ENVELOPE_FORMAT, "offsets": offsets, "state": state}), 3)
    if len(packed) > CHECKPOINT_MAX_BYTES:
        parts = ", ".join(sorted(state)[:6])
        raise CheckpointTooLarge(
            f"a checkpoint of {len(packed) / 2**20:.1f} MiB (compressed; its state holds {parts}) is over the "
            f"{CHECKPOINT_MAX_BYTES / 2**20:g} MiB one Kafka record may hold, so it cannot be saved. The running "
            "policy keeps every task of its longest window plus its quiet time in the ranking's checkpoint; a "
            "catch-up holds the events it waits with. Fewer tasks per window (shorter scales) or more partitions "
            "for the normalising side bring it under the limit")
    return packed


def unpack(data: bytes | None) -> tuple[dict[str, Any] | None, dict[str, int]]:
    """(state, offsets) from a table value; (None, {}) for nothing or an envelope this version cannot read."""
    if not data:
        return None, {}
    try:
        envelope = orjson.loads(zlib.decompress(data))
    except (zlib.error, orjson.JSONDecodeError) as exc:
        log.warning("checkpoint unreadable (%s): cold start", exc)
        return None, {}
    if not isinstance(envelope, dict) or envelope.get("format") != ENVELOPE_FORMAT:
        found = envelope.get("format") if isinstance(envelope, dict) else type(envelope).__name__
        log.warning("checkpoint format %r, expected %r: cold start", found, ENVELOPE_FORMAT)
        return None, {}
    return envelope["state"], {str(k): int(v) for k, v in envelope["offsets"].items()}
