"""Compiled Avro decode of the event types: the records ``streams.serde.codec.decode`` returns, at about half its
CPU per record.

The direct worker decodes every task and job event it reads: ``codec.decode`` spent ~4 us of ~6.5 us a record in
fastavro's ``schemaless_reader`` (its set-up around a 40-byte body, then a dict) and ~1.5 us building the record
from the dict. Here each event type's current writer schema becomes a list of field kinds, read in one loop over
the bytes into the record's positional arguments (a function call per field, as a first version did, saved
nothing). Only flat records of long, int, string, boolean, double, unions of null with one of those, and
TaskFinish's status enum are compiled, and only when the dataclass takes the schema's fields in the schema's
order. Anything the loop is not sure of -- an older writer schema, a varint longer than 64 bits, an int beyond
32 bits, a boolean byte other than 0 and 1, a union or enum index out of range, a truncated or over-long body,
invalid UTF-8 -- goes to ``codec.decode`` whole, so a record decodes to the codec's record or fails with the
codec's ``DecodeError``, never to something else. tests/unit/serde/test_fast_decode.py holds it to
``codec.decode`` on valid and on corrupted bytes.

>>> from streams.core.events import JobStart
>>> decode(codec.encode(JobStart("j1", 5, declared_tasks=2))) == JobStart("j1", 5, declared_tasks=2)
True
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro

from streams.core import events as ev
from streams.serde import codec

LONG, INT, STRING, BOOLEAN, DOUBLE, ENUM = range(6)
_KINDS = {"long": LONG, "int": INT, "string": STRING, "boolean": BOOLEAN, "double": DOUBLE}
_LONG_LIMIT = 1 << 63
_INT_LIMIT = 1 << 31
_DOUBLE = struct.Struct("<d")
_STATUS_VALUES = frozenset(status.value for status in ev.Status)
# (kind, null index of its union or -1, the enum's values by index or None)
Field = tuple[int, int, tuple[Any, ...] | None]


class _Unsure(Exception):
    """Bytes the loop does not vouch for: the record goes to ``codec.decode`` instead."""


# What ``_read`` raises on bytes it does not vouch for (a short body, a bad double, invalid UTF-8): those go to the
# codec. Anything else is a defect of this module and must surface, not turn into a silent slowdown.
_MALFORMED = (_Unsure, IndexError, struct.error, UnicodeDecodeError)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of more than one byte (the loop reads one-byte ones itself)."""
    n, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:  # longer than a 64-bit varint: fastavro's C reader wraps; the codec decides
            raise _Unsure
    value = (n >> 1) ^ -(n & 1)
    if not -_LONG_LIMIT <= value < _LONG_LIMIT:
        raise _Unsure
    return value, pos


def _read(data: bytes, fields: list[Field]) -> list[Any]:
    """The fields' values from the body after the single-object header; ``_Unsure`` (or an IndexError, a
    struct.error, a UnicodeDecodeError) where the codec must decide."""
    pos = codec.HEADER_SIZE
    values: list[Any] = []
    for kind, null_index, symbols in fields:
        if null_index >= 0:
            byte = data[pos]
            pos += 1
            if byte != 0 and byte != 2:  # the union's index 0 or 1, zigzag
                raise _Unsure
            if byte >> 1 == null_index:
                values.append(None)
                continue
        if kind == DOUBLE:
            values.append(_DOUBLE.unpack_from(data, pos)[0])
            pos += 8
            continue
        if kind == BOOLEAN:
            byte = data[pos]
            if byte > 1:
                raise _Unsure
            values.append(byte == 1)
            pos += 1
            continue
        byte = data[pos]  # a long, an int, a string's length, an enum's index: a varint, most of one byte
        if byte < 0x80:
            value, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            value, pos = _varint(data, pos)
        if kind == STRING:
            end = pos + value
            if value < 0 or end > len(data):  # a slice would not raise
                raise _Unsure
            values.append(data[pos:end].decode("utf-8"))
            pos = end
        elif kind == ENUM:
            if symbols is None or not 0 <= value < len(symbols):  # a negative index would pick from the end
                raise _Unsure
            values.append(symbols[value])
        elif kind == INT and not -_INT_LIMIT <= value < _INT_LIMIT:
            raise _Unsure
        else:
            values.append(value)
    if pos != len(data):
        raise _Unsure  # trailing bytes: the codec's error says how many
    return values


def _field(avro_type: Any, record_type: type) -> Field | None:
    """How one field is read, or None when this module does not compile it."""
    null_index = -1
    if isinstance(avro_type, list):
        if len(avro_type) != 2 or "null" not in avro_type:
            return None
        null_index = avro_type.index("null")
        avro_type = avro_type[1 - null_index]
    if isinstance(avro_type, str) and avro_type in _KINDS:
        return _KINDS[avro_type], null_index, None
    if record_type is ev.TaskFinish and isinstance(avro_type, dict) and avro_type.get("type") == "enum":
        symbols = avro_type["symbols"]
        if not set(symbols) <= _STATUS_VALUES:  # a symbol events.Status lacks: the codec decides (and says why)
            return None
        return ENUM, null_index, tuple(ev.Status(symbol) for symbol in symbols)  # as the codec
    return None


def compile_decoder(record_type: type) -> Callable[[bytes], Any] | None:
    """A function from a whole single-object encoding of ``record_type`` (its current writer schema) to the
    record, raising where the codec must decide; None when the type is not compiled."""
    schema = codec.codec_for(record_type).schema
    names = [field["name"] for field in schema["fields"]]
    if names != list(getattr(record_type, "__dataclass_fields__", ())):  # positional arguments in schema order
        return None
    fields = [_field(field["type"], record_type) for field in schema["fields"]]
    if any(field is None for field in fields):
        return None
    plan: list[Field] = [field for field in fields if field is not None]

    def decode(data: bytes) -> Any:
        return record_type(*_read(data, plan))

    return decode


_BATCH = codec.codec_for(ev.TaskEventBatch)
_FORWARDED_HEADERS = codec.forwarded_headers()
_DECODERS: dict[bytes, Callable[[bytes], Any]] = {}
for _type in codec.RECORD_TYPES:
    _decoder = compile_decoder(_type)
    if _decoder is not None:
        _DECODERS[codec.codec_for(_type).header] = _decoder


def _forwarded(data: bytes) -> Any:
    """One event of a batch: a task event's bytes (``codec.forwarded_event``'s check), decoded here."""
    if bytes(data[: codec.HEADER_SIZE]) not in _FORWARDED_HEADERS:
        raise _Unsure  # the codec refuses it, with its reason
    return decode(data)


# What fastavro's reader raises on a frame it cannot read (a short or garbled body, a bad length, invalid UTF-8),
# and what an event's decode raises on bytes the codec refuses: the codec then decides the whole batch.
_BATCH_MALFORMED = (*_MALFORMED, EOFError, ValueError)


def _decode_batch(data: bytes) -> ev.TaskEventBatch:
    """A ``TaskEventBatch``: its frame by fastavro's reader, each event by ``decode`` (the codec's mapper decodes
    each through the codec's slower path). Anything the reader or an event's decode refuses, or a frame that is not
    exactly the body, goes to the codec, which says why; so do bytes the codec reads with fastavro's pure-Python
    reader (``codec.MAYBE_OVERLONG``: a varint past 64 bits, which the C reader would wrap)."""
    if codec.MAYBE_OVERLONG.search(data, codec.HEADER_SIZE) is not None:
        raise _Unsure
    stream = io.BytesIO(data)
    stream.seek(codec.HEADER_SIZE)
    try:
        body: dict[str, Any] = fastavro.schemaless_reader(stream, _BATCH.schema, None)  # type: ignore[assignment]
        events = tuple(map(_forwarded, body["events"]))
    except _BATCH_MALFORMED as exc:  # the codec decides, with its reason
        raise _Unsure from exc
    if stream.tell() != len(data):
        raise _Unsure
    return ev.TaskEventBatch(body["source"], tuple(body["offsets"]), events)


_DECODERS[_BATCH.header] = _decode_batch


def decode(data: bytes | None) -> Any:
    """``codec.decode(data)``: compiled for the current writer schemas of the flat record types, the codec itself
    for anything else and for bytes the loop is not sure of (it returns the record or raises its
    ``DecodeError``)."""
    if data is not None:
        decoder = _DECODERS.get(bytes(data[: codec.HEADER_SIZE]))
        if decoder is not None:
            try:
                return decoder(data)
            except _MALFORMED:  # bytes the loop is not sure of: the codec decides (and says why)
                pass
    return codec.decode(data)
