"""Avro codecs for every laggard record: single-object encoding, no registry needed.

A value on the wire is ``C3 01`` + the 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema's
Parsing Canonical Form + the Avro binary body. Any Avro tool can tell which ``schemas/*.avsc`` wrote it and decode
it. Keys are plain UTF-8 strings. fastavro does the work: it measured several times faster than the reference
``avro`` package for both directions (see ``laggard bench``).

>>> from streams.core.events import TaskFinish, Status
>>> record = TaskFinish("j1", "t1", 0, "n7", ts_us=5, duration_us=4, status=Status.SUCCEEDED)
>>> data = encode(record)
>>> data[:2].hex()
'c301'
>>> decode(data) == record
True
"""

from __future__ import annotations

import io
import re
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro import _read_py
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

from streams.core import events as ev

NAMESPACE = "io.laggard"


def schema_dir(module: Path, prefix: Path) -> Path:
    """Where the ``*.avsc`` files are: ``schemas/`` of the checkout the code runs from (a source tree, an editable
    install), else the copy a wheel installs as data (``pyproject.toml``) under its scheme's prefix,
    ``<prefix>/share/laggard/schemas``. The prefix is the one the package sits under
    (``<prefix>/lib/pythonX.Y/site-packages/streams/serde/codec.py``: a venv, ``--user``, ``--prefix``, the image's
    ``pip install .``), else ``prefix`` (``sys.prefix``). The checkout's path when none holds them, so that a
    missing schema names the place a developer expects."""
    candidates = [module.parents[2] / "schemas"]
    if len(module.parents) > 5:
        candidates.append(module.parents[5] / "share" / "laggard" / "schemas")
    candidates.append(prefix / "share" / "laggard" / "schemas")
    return next((c for c in candidates if (c / f"{NAMESPACE}.TaskStart.avsc").is_file()), candidates[0])


SCHEMA_DIR = schema_dir(Path(__file__).resolve(), Path(sys.prefix))
# When a schema changes, its old version moves here (self-contained, one file per old version), so records that
# old writers left on topics, compacted ones above all, still decode: they are resolved into the current schema.
PREVIOUS_DIR = SCHEMA_DIR / "previous"
MAGIC = b"\xc3\x01"
HEADER_SIZE = 10

RECORD_TYPES: tuple[type, ...] = (
    ev.TaskStart,
    ev.TaskCheckpoint,
    ev.TaskFinish,
    ev.JobStart,
    ev.JobFinish,
    ev.NormalizedTask,
    ev.Progress,
    ev.NodeMoments,
    ev.NodeSummary,
    ev.TaskEventBatch,
    ev.TaskRows,
    ev.NodeScore,
    ev.NodeClass,
    ev.StragglerPrediction,
    ev.BlacklistEntry,
    ev.RemovedEntry,
    ev.BlacklistDelta,
    ev.BlacklistSnapshot,
    ev.DeadLetter,
)


class DecodeError(ValueError):
    """The bytes are not a laggard record; ``str(error)`` is the reason for the dead-letter topic."""


@dataclass(frozen=True)
class RecordCodec:
    """Writer schema, fingerprint and dataclass mapping of one record type."""

    record_type: type
    schema: Any
    header: bytes
    to_dict: Callable[[Any], dict[str, Any]]
    from_dict: Callable[[dict[str, Any]], Any]


def schema_path(name: str) -> Path:
    return SCHEMA_DIR / f"{NAMESPACE}.{name}.avsc"


def fingerprint_of(parsed_schema: Any) -> bytes:
    """CRC-64-AVRO fingerprint of the Parsing Canonical Form, as the 8 little-endian bytes of the spec."""
    # fastavro spells the fingerprint as the hex of its little-endian bytes (as the avro package does);
    # tests/unit/serde checks this against an independent implementation of the spec's Rabin algorithm.
    value = int.from_bytes(bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed_schema), "CRC-64-AVRO")),
                           "little")
    return struct.pack("<Q", value)


def _entry_to_dict(entry: Any) -> dict[str, Any]:
    return {f.name: getattr(entry, f.name) for f in fields(entry)}


def _mappers(record_type: type) -> tuple[Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], Any]]:
    names = tuple(f.name for f in fields(record_type))

    def plain_to(obj: Any) -> dict[str, Any]:
        return {name: getattr(obj, name) for name in names}

    def plain_from(data: dict[str, Any]) -> Any:
        return record_type(**data)

    if record_type is ev.TaskFinish:

        def finish_to(obj: Any) -> dict[str, Any]:
            data = plain_to(obj)
            data["status"] = obj.status.value
            return data

        statuses = {status.value: status for status in ev.Status}  # a dict look-up: Status(value) costs ~4x

        def finish_from(data: dict[str, Any]) -> Any:
            status = statuses.get(data["status"])
            data["status"] = ev.Status(data["status"]) if status is None else status  # unknown: Status raises
            return ev.TaskFinish(**data)

        return finish_to, finish_from
    if record_type is ev.TaskCheckpoint:

        def checkpoint_to(obj: Any) -> dict[str, Any]:
            data = plain_to(obj)
            data["features"] = dict(obj.features)
            return data

        return checkpoint_to, plain_from
    if record_type is ev.TaskEventBatch:
        return _batch_mappers()
    if record_type is ev.TaskRows:

        def rows_from(data: dict[str, Any]) -> Any:
            return ev.TaskRows(data["source"], *(tuple(data[name]) for name in names[1:]))

        return plain_to, rows_from
    if record_type in (ev.BlacklistDelta, ev.BlacklistSnapshot, ev.NodeSummary):
        lists = ("nodes",) if record_type is ev.BlacklistSnapshot else ("added", "removed")
        item_types: dict[str, type] = (
            {"added": ev.NodeMoments, "removed": ev.NodeMoments} if record_type is ev.NodeSummary
            else {"added": ev.BlacklistEntry, "removed": ev.RemovedEntry, "nodes": ev.BlacklistEntry})

        def nested_to(obj: Any) -> dict[str, Any]:
            data = plain_to(obj)
            for name in lists:
                data[name] = [_entry_to_dict(entry) for entry in data[name]]
            return data

        def nested_from(data: dict[str, Any]) -> Any:
            for name in lists:
                data[name] = tuple(item_types[name](**item) for item in data[name])
            return record_type(**data)

        return nested_to, nested_from
    return plain_to, plain_from


def _batch_mappers() -> tuple[Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], Any]]:
    """A batch's events travel as their own single-object encodings (``encode_forwarded`` writes the bytes a
    normaliser read, not encoded again); ``streams.serde.fast_decode`` reads them faster than this does."""

    def batch_to(obj: Any) -> dict[str, Any]:
        return {"source": obj.source, "offsets": list(obj.offsets), "events": [encode(e) for e in obj.events]}

    def batch_from(data: dict[str, Any]) -> Any:
        return ev.TaskEventBatch(data["source"], tuple(data["offsets"]), tuple(map(forwarded_event, data["events"])))

    return batch_to, batch_from


FORWARDED_TYPES = (ev.TaskStart, ev.TaskCheckpoint, ev.TaskFinish)


@cache
def forwarded_headers() -> frozenset[bytes]:
    """The headers a forwarded event may carry: a task event's current or previous writer schema."""
    return frozenset({codec_for(t).header for t in FORWARDED_TYPES}
                     | {header for header, (_, current) in _previous_writers().items()
                        if current.record_type in FORWARDED_TYPES})


def forwarded_event(data: bytes) -> Any:
    """One event of a batch; bytes that are not a task event's (a batch inside a batch above all: decoding one
    level per call would make a crafted record of nested batches cost minutes) are refused by their header."""
    if bytes(data[:HEADER_SIZE]) not in forwarded_headers():
        raise DecodeError(f"a forwarded event is not a task event (header {bytes(data[:HEADER_SIZE]).hex()})")
    return decode(data)


_CODECS: dict[type, RecordCodec] = {}  # not functools.cache: mypy holds type objects unhashable


def codec_for(record_type: type) -> RecordCodec:
    if record_type not in _CODECS:
        schema = load_schema(str(schema_path(record_type.__name__)))
        to_dict, from_dict = _mappers(record_type)
        _CODECS[record_type] = RecordCodec(record_type, schema, MAGIC + fingerprint_of(schema), to_dict, from_dict)
    return _CODECS[record_type]


@cache
def _by_header() -> dict[bytes, RecordCodec]:
    return {codec_for(t).header: codec_for(t) for t in RECORD_TYPES}


@cache
def _previous_writers() -> dict[bytes, tuple[Any, RecordCodec]]:
    by_name = {t.__name__: t for t in RECORD_TYPES}
    writers: dict[bytes, tuple[Any, RecordCodec]] = {}
    for path in sorted(PREVIOUS_DIR.glob("*.avsc")):
        writer = load_schema(str(path))
        if not isinstance(writer, dict):
            raise ValueError(f"{path} holds no record schema")
        current = codec_for(by_name[str(writer["name"]).rsplit(".", 1)[-1]])
        writers[MAGIC + fingerprint_of(writer)] = (writer, current)
    return writers


def encode(record: object) -> bytes:
    """Single-object encoding of any laggard record dataclass."""
    codec = codec_for(record.__class__)
    buffer = io.BytesIO()
    buffer.write(codec.header)
    fastavro.schemaless_writer(buffer, codec.schema, codec.to_dict(record))
    return buffer.getvalue()


def decode(data: bytes | None) -> Any:
    """The record in ``data``; raises DecodeError with a reason when it is not one of ours."""
    if data is None:
        raise DecodeError("empty value (tombstone or null)")
    if len(data) < HEADER_SIZE or data[:2] != MAGIC:
        raise DecodeError(f"not Avro single-object encoding (starts with {bytes(data[:2]).hex() or 'nothing'})")
    header = bytes(data[:HEADER_SIZE])
    codec = _by_header().get(header)
    if codec is not None:
        writer = codec.schema
    elif header in _previous_writers():
        writer, codec = _previous_writers()[header]
    else:
        raise DecodeError(f"unknown writer schema fingerprint {bytes(data[2:HEADER_SIZE]).hex()}")
    stream = io.BytesIO(data[HEADER_SIZE:])
    overlong = MAYBE_OVERLONG.search(data, HEADER_SIZE) is not None
    checked = _written_back(data, writer) if overlong and writer is codec.schema else None
    if checked is not None:
        overlong = False
        stream.seek(0, io.SEEK_END)  # read to its end: the body written back is all of it
    reader = _read_py.schemaless_reader if overlong else fastavro.schemaless_reader
    try:
        body = checked if checked is not None else reader(stream, writer, None if writer is codec.schema
                                                          else codec.schema)
        if overlong:
            _check_longs(body)
        record = codec.from_dict(body)  # type: ignore[arg-type]
    except Exception as exc:
        raise DecodeError(f"corrupt {codec.record_type.__name__} body: {type(exc).__name__}: {exc}") from exc
    if stream.tell() != len(data) - HEADER_SIZE:
        raise DecodeError(f"{len(data) - HEADER_SIZE - stream.tell()} trailing bytes after the record body")
    return record


# fastavro's C reader wraps a varint past 64 bits (2**64 + 5 decodes as 5): a corrupt timestamp would be taken for
# a valid one. Such a varint needs at least 9 bytes in a row with the continuation bit set, which our records'
# longs (microsecond times, about 7 bytes) never have; a body that does (or a string with many non-ASCII
# characters) is read by fastavro's pure-Python reader, whose ints do not wrap, and refused past 64 bits.
MAYBE_OVERLONG = re.compile(rb"[\x80-\xff]{9}")
_LONG_LIMIT = 1 << 63


def _written_back(data: bytes, schema: Any) -> Any | None:
    """The C reader's body of ``data`` (current writer ``schema``) if writing it back gives the body's very bytes,
    else None. Then no varint in it was past 64 bits, however ``MAYBE_OVERLONG`` matched: the C reader wraps such
    a varint to a value whose varint is shorter. Nine bytes of 0x80 and over come by chance in a record's doubles
    (a summary's means), and the pure-Python reader of such a record cost ~10x the C one."""
    body = bytes(data[HEADER_SIZE:])
    try:
        read = fastavro.schemaless_reader(io.BytesIO(body), schema, None)
        written = io.BytesIO()
        fastavro.schemaless_writer(written, schema, read)
    except Exception:  # the pure-Python reader decides, with its reason
        return None
    return read if written.getvalue() == body else None


def _check_longs(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _check_longs(item)
    elif isinstance(value, list):
        for item in value:
            _check_longs(item)
    elif isinstance(value, int) and not -_LONG_LIMIT <= value < _LONG_LIMIT:
        raise ValueError(f"a long beyond 64 bits ({value})")


def encode_forwarded(source: str, offsets: list[int], values: list[bytes]) -> bytes:
    """The ``TaskEventBatch`` of task events forwarded as read: ``values`` are their single-object encodings on
    ``source`` (decoded once by the normaliser, so valid), written into the batch unchanged.

    >>> from streams.core.events import TaskStart
    >>> start = TaskStart("j1", "t1", 0, "n7", 5)
    >>> batch = decode(encode_forwarded("task-events:3", [41], [encode(start)]))
    >>> batch.source, batch.offsets, batch.events == (start,)
    ('task-events:3', (41,), True)
    """
    codec = codec_for(ev.TaskEventBatch)
    buffer = io.BytesIO()
    buffer.write(codec.header)
    fastavro.schemaless_writer(buffer, codec.schema, {"source": source, "offsets": offsets, "events": values})
    return buffer.getvalue()


def encode_key(key: str) -> bytes:
    return key.encode("utf-8")


def decode_key(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")
