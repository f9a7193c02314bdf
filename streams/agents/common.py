"""What every agent does around the core: decode or dead-letter, and send records with their keys."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar, cast

from faust.types import EventT, TopicT

from streams import metrics
from streams.agents.records import dead_letter
from streams.agents.records import reason_to_refuse as reason_to_refuse  # re-exported
from streams.serde import codec

log = logging.getLogger(__name__)
R = TypeVar("R")


async def decode_or_dead_letter(event: EventT[bytes], dead_letters: TopicT | None,
                                expected: tuple[type[R], ...]) -> R | None:
    """The record in a Faust event, or None after sending the raw bytes to ``dead-letters`` with the reason.

    Two agents read task-events; only one of them (``dead_letters`` not None) reports a bad record, once.
    """
    message = event.message
    try:
        record = codec.decode(message.value)
        reason = reason_to_refuse(record, expected, message.topic)
    except codec.DecodeError as exc:
        record, reason = None, str(exc)
    if reason is None and isinstance(record, expected):
        return record
    if dead_letters is None:
        return None
    letter = dead_letter(message.topic, message.partition, message.offset, message.key, message.value, reason,
                         message.timestamp)
    await send_raw(dead_letters, message.key, codec.encode(letter))
    return None


async def send(topic: TopicT, key: str, record: object) -> asyncio.Future[Any]:
    """``record`` in Avro on ``topic`` under ``key``; the future of the broker's acknowledgement."""
    return await send_raw(topic, codec.encode_key(key), codec.encode(record))


async def send_raw(topic: TopicT, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
                   ) -> asyncio.Future[Any]:
    """Queue ``value``; the future of the broker's acknowledgement (a send is not on the broker when queued)."""
    delivery = await (topic.send(key=key, value=value) if headers is None  # most records carry none
                      else topic.send(key=key, value=value, headers=headers))
    metrics.EVENTS_OUT.labels(topic.get_topic_name()).inc()
    return cast("asyncio.Future[Any]", delivery)
