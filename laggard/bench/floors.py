"""Decode floors: how fast the same records decode with orjson, the Avro codec, fastavro alone and ``avro``.

Every loop decodes the same list of records (byte strings prepared beforehand), so the rates differ only by
the decoder:

* ``orjson_loads`` -- ``orjson.loads`` of each record's JSON (``{"type": ..., **fields}``, the format of
  ``laggard replay --sink stdout``) into a dict: the floor the pipeline is compared with;
* ``orjson_records`` -- the same, plus building the record dataclass (the JSON equivalent of the codec);
* ``codec_decode`` -- ``streams.serde.codec.decode``: header lookup, fastavro, dataclass mapping;
* ``fastavro_raw`` -- ``fastavro.schemaless_reader`` of the body into a dict, no mapping;
* ``avro_reference`` -- the reference ``avro`` package's ``DatumReader`` on the same bodies (a prefix of
  them: it is slow), to check the codec's claim that fastavro is faster.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import fastavro
import orjson

from laggard.bench.common import best_rate
from streams.core import events as ev
from streams.serde import codec

RECORD_TYPES: dict[str, type] = {t.__name__: t for t in codec.RECORD_TYPES}


def to_json(record: Any) -> bytes:
    return orjson.dumps({"type": type(record).__name__, **asdict(record)})


def from_json(data: bytes) -> Any:
    """A record from its JSON; the inverse of :func:`to_json` for the task and job events."""
    document = orjson.loads(data)
    record_type = RECORD_TYPES[document.pop("type")]
    if record_type is ev.TaskFinish:
        document["status"] = ev.Status(document["status"])
    return record_type(**document)


def _loop(decode: Callable[[bytes], Any], items: Sequence[bytes]) -> Callable[[], int]:
    def run() -> int:
        for item in items:
            decode(item)
        return len(items)

    return run


def _fastavro_loop(bodies: Sequence[tuple[Any, bytes]]) -> Callable[[], int]:
    reader = fastavro.schemaless_reader

    def run() -> int:
        for schema, body in bodies:
            reader(io.BytesIO(body), schema, None)
        return len(bodies)

    return run


def _avro_reference_loop(bodies: Sequence[tuple[Any, bytes]]) -> Callable[[], int]:
    import avro.io
    import avro.schema

    readers: dict[int, Any] = {}
    prepared = []
    for schema, body in bodies:
        if id(schema) not in readers:
            readers[id(schema)] = avro.io.DatumReader(avro.schema.parse(orjson.dumps(schema).decode()))
        prepared.append((readers[id(schema)], body))

    def run() -> int:
        for reader, body in prepared:
            reader.read(avro.io.BinaryDecoder(io.BytesIO(body)))
        return len(prepared)

    return run


def decode_floors(records: Sequence[Any], avro_reference_records: int, repeats: int) -> dict[str, Any]:
    """Records per second of each decoder over ``records`` (the reference package over a prefix)."""
    as_json = [to_json(record) for record in records]
    as_avro = [codec.encode(record) for record in records]
    schemas = {codec.codec_for(t).header: codec.codec_for(t).schema for t in codec.RECORD_TYPES}
    bodies = [(schemas[data[: codec.HEADER_SIZE]], data[codec.HEADER_SIZE :]) for data in as_avro]
    assert all(codec.decode(a) == from_json(j) == r for a, j, r in zip(as_avro[:100], as_json, records, strict=False))
    figures = {
        "records": len(records),
        "mix": dict(Counter(type(record).__name__ for record in records).most_common()),
        "json_bytes_per_record": sum(map(len, as_json)) / len(as_json),
        "avro_bytes_per_record": sum(map(len, as_avro)) / len(as_avro),
        "orjson_loads_per_s": best_rate(_loop(orjson.loads, as_json), repeats),
        "orjson_records_per_s": best_rate(_loop(from_json, as_json), repeats),
        "codec_decode_per_s": best_rate(_loop(codec.decode, as_avro), repeats),
        "fastavro_raw_per_s": best_rate(_fastavro_loop(bodies), repeats),
        "avro_reference_records": min(avro_reference_records, len(bodies)),
        "avro_reference_per_s": best_rate(_avro_reference_loop(bodies[:avro_reference_records]), repeats),
    }
    figures["fastavro_vs_avro_reference"] = figures["fastavro_raw_per_s"] / figures["avro_reference_per_s"]
    figures["codec_vs_orjson_records"] = figures["codec_decode_per_s"] / figures["orjson_records_per_s"]
    return figures
