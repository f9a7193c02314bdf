"""What every agent does around the core: decode or dead-letter, and send records with their keys."""

from __future__ import annotations

import logging
from typing import Any

from streams.core.events import DeadLetter, validate
from streams.serde import codec

log = logging.getLogger(__name__)


async def decode_or_dead_letter(event: Any, dead_letters: Any, expected: tuple[type, ...]) -> Any | None:
    """The record in a Faust event, or None after sending the raw bytes to ``dead-letters`` with the reason.

    Two agents read task-events; only one of them (``dead_letters`` not None) reports a bad record, once.
    """
    message = event.message
    try:
        record = codec.decode(message.value)
        if not isinstance(record, expected):
            reason: str | None = f"unexpected {type(record).__name__} on {message.topic}"
        else:
            reason = validate(record)
    except codec.DecodeError as exc:
        record, reason = None, str(exc)
    if reason is None:
        return record
    letter = DeadLetter(message.topic, message.partition, message.offset, message.key, message.value or b"",
                        reason, int((message.timestamp or 0) * 1_000_000))
    if dead_letters is None:
        return None
    log.warning("dead letter from %s[%d]@%d: %s", message.topic, message.partition, message.offset, reason)
    await dead_letters.send(key=message.key, value=codec.encode(letter))
    return None


async def send(topic: Any, key: str, record: Any) -> None:
    await topic.send(key=codec.encode_key(key), value=codec.encode(record))
