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

log = logging.getLogger(__name__)
ENVELOPE_FORMAT = 1


class Stateful(Protocol):
    """A core state with an explicit life cycle: plain JSON-able snapshot, and restore (ValueError: cold)."""

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...


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
    if not isinstance(envelope, dict) or envelope.get("format") != ENVELOPE_FORMAT:
        found = envelope.get("format") if isinstance(envelope, dict) else type(envelope).__name__
        log.warning("checkpoint format %r, expected %r: cold start", found, ENVELOPE_FORMAT)
        return None, {}
    return envelope["state"], {str(k): int(v) for k, v in envelope["offsets"].items()}
