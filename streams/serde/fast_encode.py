"""Compiled Avro encode: the bytes of ``streams.serde.codec.encode``, at about half its CPU per record (the
replayer's events, the direct worker's outputs).

fastavro's ``schemaless_writer`` costs about 3.5 us a record of set-up (schema look-up, encoder, stream) on top
of the dict the codec builds first (1.3 us): most of the replayer's encode time on Google's short records. Here
each record type's writer is compiled once from its schema file into one small function per field; a record is
its single-object header and the concatenation of its fields. Only the Avro types the events use are compiled
(string, int, long, boolean, double, enum, unions of null with one of those, and arrays of records made of
them: the summaries, deltas and snapshots); a record type whose schema has any other falls back to
``codec.encode`` whole, so a schema change can make this slower, never different. So does a record with a
value outside what the writers check (a long beyond 64 bits, a bool or an int where a double goes, a float
where an int goes, anything but an int of 32 bits in a nullable int, ...): the codec writes it or raises its
own error, so invalid values fail here exactly as they fail there.
tests/unit/serde/test_fast_encode.py holds it byte for byte to ``codec.encode`` and to ``codec.decode``.

>>> from streams.core.events import JobStart
>>> from streams.serde import codec
>>> encode(JobStart("j1", 5, declared_tasks=2)) == codec.encode(JobStart("j1", 5, declared_tasks=2))
True
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from streams.core import events as ev
from streams.serde import codec

Writer = Callable[[Any], bytes]
_SMALL_LIMIT = 1 << 14  # zigzag varints of 0 .. 16383 kept ready (string lengths, attempts, indices)
_LONG_LIMIT = 1 << 63
_INT_LIMIT = 1 << 31


class _Unchecked(Exception):
    """A value the compiled writers do not vouch for: the record goes to ``codec.encode`` instead."""


def _zigzag_varint(value: int) -> bytes:
    """Avro's int and long: zigzag, then 7 bits a byte, low bits first."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = tuple(_zigzag_varint(i) for i in range(_SMALL_LIMIT))


def _long(value: int) -> bytes:
    """An Avro long, or int outside a union (the codec writes an int field as a long, unchecked)."""
    if value.__class__ is not int:  # a bool, a float, an int subclass: the codec's choice
        raise _Unchecked
    if 0 <= value < _SMALL_LIMIT:
        return _SMALL[value]
    if -_LONG_LIMIT <= value < _LONG_LIMIT:
        return _zigzag_varint(value)
    raise _Unchecked  # the codec raises OverflowError


def _int(value: int) -> bytes:
    """An Avro int in a union, where the codec checks the type and the 32-bit range."""
    if value.__class__ is not int or not -_INT_LIMIT <= value < _INT_LIMIT:
        raise _Unchecked
    return _SMALL[value] if 0 <= value < _SMALL_LIMIT else _zigzag_varint(value)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")  # not a str: AttributeError, so the codec's error
    size = len(data)
    return (_SMALL[size] if size < _SMALL_LIMIT else _zigzag_varint(size)) + data


def _boolean(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"  # the codec's too, for any value


_DOUBLE = struct.Struct("<d")  # Avro's double: IEEE 754, little-endian


def _double(value: float) -> bytes:
    if value.__class__ is not float:  # an int the codec writes, a bool it refuses: its choice
        raise _Unchecked
    return _DOUBLE.pack(value)


_PRIMITIVES: dict[str, Writer] = {"string": _string, "int": _long, "long": _long, "boolean": _boolean,
                                  "double": _double}  # fmt: skip


def _enum(symbols: list[str]) -> Writer:
    indices = {symbol: _SMALL[i] for i, symbol in enumerate(symbols)}  # a StrEnum member finds its str's entry
    return indices.__getitem__


def _nullable(null_index: int, other_index: int, other: Writer) -> Writer:
    null, tag = _SMALL[null_index], _SMALL[other_index]

    def write(value: Any) -> bytes:
        return null if value is None else tag + other(value)

    return write


def _array(item: Writer) -> Writer:
    """An Avro array as fastavro writes one: a single block (its count, the items), then the empty block."""

    def write(items: Any) -> bytes:
        if not items:
            return b"\x00"
        return _long(len(items)) + b"".join([item(entry) for entry in items]) + b"\x00"

    return write


def _writer(avro_type: Any, in_union: bool = False) -> Writer | None:
    """The writer of one field's type, or None when it is not one this module compiles."""
    if isinstance(avro_type, str):
        return _int if in_union and avro_type == "int" else _PRIMITIVES.get(avro_type)
    if isinstance(avro_type, dict) and avro_type.get("type") == "enum":
        return _enum(list(avro_type["symbols"]))
    if isinstance(avro_type, dict) and avro_type.get("type") == "array" and not in_union:
        items = avro_type["items"]  # a record defined here, or the name of one defined before
        name = items.get("name", "") if isinstance(items, dict) else items
        item_type = getattr(ev, str(name).rsplit(".", 1)[-1], None)
        if item_type not in codec.RECORD_TYPES:
            return None
        body = _body(item_type, items if isinstance(items, dict) else codec.codec_for(item_type).schema)
        return None if body is None else _array(body)
    if isinstance(avro_type, list) and len(avro_type) == 2 and "null" in avro_type:
        other_index = 1 - avro_type.index("null")
        other = _writer(avro_type[other_index], in_union=True)
        return None if other is None else _nullable(avro_type.index("null"), other_index, other)
    return None


def _body(record_type: type, schema: Any) -> Writer | None:
    """The writer of a record's fields in schema order (its body), or None when one is not compiled."""
    if schema.get("type") != "record" or not hasattr(record_type, "__dataclass_fields__"):
        return None
    names: list[str] = []
    writers: list[Writer] = []
    for field in schema["fields"]:
        writer = _writer(field["type"])
        if writer is None or field["name"] not in record_type.__dataclass_fields__:
            return None
        names.append(field["name"])
        writers.append(writer)
    values = attrgetter(*names) if len(names) > 1 else (lambda record: (getattr(record, names[0]),))

    def body(record: Any) -> bytes:
        return b"".join([write(value) for write, value in zip(writers, values(record), strict=True)])

    return body


def compile_encoder(record_type: type) -> Writer | None:
    """A function from a record of ``record_type`` to its single-object encoding, or None (use the codec)."""
    record_codec = codec.codec_for(record_type)
    body = _body(record_type, record_codec.schema)
    if body is None:
        return None
    header = record_codec.header

    def encode(record: Any) -> bytes:
        return header + body(record)

    return encode


# Every record type, compiled where its schema allows (a TaskCheckpoint's map is not): the codec otherwise.
_ENCODERS: dict[type, Writer] = {t: compile_encoder(t) or codec.encode for t in codec.RECORD_TYPES}

# A NodeScore (half the direct worker's output records, ~143 k in a statistics worker's first 300 k Google events) in
# fewer steps than the field-by-field writer: its node's string and its window's two longs kept from the scores
# before, its five doubles and two union tags in one struct pack. Only for the schema these fields match (else the
# compiled writer above); any value the compiled writers would not vouch for goes to that writer, so to the codec.
_SCORE_FIELDS = [("node_id", "string"), ("window_start_us", "long"), ("window_end_us", "long"), ("n", "int"),
                 ("mean", "double"), ("std", "double"), ("ci_low", ["null", "double"]),
                 ("ci_high", ["null", "double"]), ("normalized_count", "double")]  # fmt: skip
_SCORE_TAIL = struct.Struct("<dd" + "Bd" * 2 + "d")  # mean, std, tag and ci_low, tag and ci_high, normalized_count
_SCORE_NO_CI = struct.Struct("<ddH")  # mean, std, the two null tags (zero), then normalized_count as _DOUBLE
_NODE_CACHE_MAX = 1 << 17  # node strings kept (a fleet's nodes: ~12.5 k on Google 2011); cleared past it


def _node_score_encoder(fallback: Writer) -> Writer:
    header = codec.codec_for(ev.NodeScore).header
    nodes: dict[str, bytes] = {}
    window: list[Any] = [None, None, b""]  # the last window's start, end and their bytes
    pack_tail, pack_bare, pack_double = _SCORE_TAIL.pack, _SCORE_NO_CI.pack, _DOUBLE.pack

    def encode(score: Any) -> bytes:
        start, end, n = score.window_start_us, score.window_end_us, score.n
        mean, std, low, high, count = score.mean, score.std, score.ci_low, score.ci_high, score.normalized_count
        if (start.__class__ is not int or end.__class__ is not int or n.__class__ is not int
                or mean.__class__ is not float or std.__class__ is not float or count.__class__ is not float):
            return fallback(score)
        if start != window[0] or end != window[1]:
            window[:] = start, end, _long(start) + _long(end)
        span: bytes = window[2]
        if low is None and high is None:
            tail = pack_bare(mean, std, 0) + pack_double(count)
        elif low.__class__ is float and high.__class__ is float:
            tail = pack_tail(mean, std, 2, low, 2, high, count)
        else:
            return fallback(score)
        node_id = score.node_id
        node = nodes.get(node_id)
        if node is None:
            if node_id.__class__ is not str:
                return fallback(score)
            if len(nodes) >= _NODE_CACHE_MAX:
                nodes.clear()
            node = nodes[node_id] = _string(node_id)
        return header + node + span + (_SMALL[n] if 0 <= n < _SMALL_LIMIT else _long(n)) + tail

    return encode


def _with_node_scores(encoders: dict[type, Writer]) -> None:
    schema = codec.codec_for(ev.NodeScore).schema
    compiled = encoders[ev.NodeScore]
    if compiled is not codec.encode and [(f["name"], f["type"]) for f in schema["fields"]] == _SCORE_FIELDS:
        encoders[ev.NodeScore] = _node_score_encoder(compiled)


_with_node_scores(_ENCODERS)


def encode(record: object) -> bytes:
    """``codec.encode(record)``, compiled for the record types, the codec itself for a type it does not compile
    and for a value the compiled writers do not check (the codec writes it or raises its own error)."""
    writer = _ENCODERS.get(record.__class__)
    if writer is None:
        return codec.encode(record)
    try:
        return writer(record)
    except (_Unchecked, AttributeError, KeyError, TypeError, ValueError, OverflowError, struct.error):
        return codec.encode(record)
