"""Every record survives encode -> decode; the bytes are what any Avro tool expects."""

from __future__ import annotations

import io
import json
import math
import struct
from dataclasses import fields

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import events as ev
from streams.serde import codec

text = st.text(min_size=1, max_size=12)
ints = st.integers(min_value=0, max_value=2**31 - 1)
longs = st.integers(min_value=0, max_value=2**62)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
opt_floats = st.none() | floats

entry = st.builds(ev.BlacklistEntry, text, st.integers(-1, 50), ints, floats, floats, opt_floats, opt_floats, text)
removed = st.builds(ev.RemovedEntry, text, text)
moments = st.builds(ev.NodeMoments, text, longs, longs, floats, floats)
STRATEGIES = {
    ev.TaskStart: st.builds(ev.TaskStart, text, text, ints, text, longs, st.booleans(), st.text(max_size=5)),
    ev.TaskCheckpoint: st.builds(
        ev.TaskCheckpoint, text, text, ints, text, longs, longs, st.dictionaries(text, floats, max_size=4)
    ),
    ev.TaskFinish: st.builds(ev.TaskFinish, text, text, ints, text, longs, longs, st.sampled_from(ev.Status)),
    ev.JobStart: st.builds(ev.JobStart, text, longs, st.none() | ints),
    ev.JobFinish: st.builds(ev.JobFinish, text, longs),
    ev.NormalizedTask: st.builds(
        ev.NormalizedTask, text, text, ints, text, longs, longs, floats, st.booleans(), st.none() | longs
    ),
    ev.Progress: st.builds(ev.Progress, ints, ints, longs),
    ev.NodeMoments: moments,
    ev.NodeSummary: st.builds(ev.NodeSummary, ints, ints, longs, longs, st.lists(moments, max_size=3).map(tuple),
                              st.lists(moments, max_size=3).map(tuple)),
    # offsets any longs: the codec carries what validation would refuse (decreasing ones) unchanged
    ev.TaskEventBatch: st.lists(st.tuples(longs, st.one_of(
        st.builds(ev.TaskStart, text, text, ints, text, longs),
        st.builds(ev.TaskFinish, text, text, ints, text, longs, longs, st.sampled_from(ev.Status)),
        st.builds(ev.TaskCheckpoint, text, text, ints, text, longs, longs, st.dictionaries(text, floats, max_size=2)))),
        max_size=4).flatmap(lambda pairs: st.builds(ev.TaskEventBatch, text, st.just(tuple(o for o, _ in pairs)),
                                                    st.just(tuple(e for _, e in pairs)))),
    # columns of any lengths: the codec carries what validation would refuse (ragged columns) unchanged
    ev.TaskRows: st.builds(ev.TaskRows, text, *(st.lists(longs, max_size=3).map(tuple) for _ in range(2)),
                           st.lists(ints, max_size=3).map(tuple),
                           *(st.lists(text, max_size=3).map(tuple) for _ in range(3)),
                           st.lists(st.integers(-1, 2**62), max_size=3).map(tuple),
                           st.lists(ints, max_size=3).map(tuple)),
    ev.NodeScore: st.builds(ev.NodeScore, text, longs, longs, ints, floats, floats, opt_floats, opt_floats, floats),
    ev.StragglerPrediction: st.builds(
        ev.StragglerPrediction, text, text, ints, text, longs, longs, floats, floats, floats, floats, text
    ),
    ev.NodeClass: st.builds(
        ev.NodeClass, text, longs, longs, ints, ints, ints, st.booleans(), floats, st.booleans(), text, longs,
        floats, floats, ints, ints, text,
    ),
    ev.BlacklistEntry: entry,
    ev.RemovedEntry: removed,
    ev.BlacklistDelta: st.builds(
        ev.BlacklistDelta, text, longs, longs, text, longs, longs,
        st.lists(entry, max_size=3).map(tuple), st.lists(removed, max_size=3).map(tuple), ints,
    ),
    ev.BlacklistSnapshot: st.builds(
        ev.BlacklistSnapshot, text, longs, longs, text, longs, longs, st.lists(entry, max_size=3).map(tuple), ints
    ),
    ev.DeadLetter: st.builds(ev.DeadLetter, text, ints, longs, st.none() | st.binary(), st.binary(), text, longs),
}


def test_every_record_type_has_a_schema_and_a_strategy() -> None:
    assert set(STRATEGIES) == set(codec.RECORD_TYPES)
    for record_type in codec.RECORD_TYPES:
        schema = json.loads(codec.schema_path(record_type.__name__).read_text())
        assert [f["name"] for f in schema["fields"]] == [f.name for f in fields(record_type)]
        assert all(f.get("doc") for f in schema["fields"]), f"{record_type.__name__}: a field lacks a doc"


@pytest.mark.parametrize("record_type", codec.RECORD_TYPES, ids=lambda t: t.__name__)
def test_round_trip(record_type: type) -> None:
    @settings(max_examples=60, deadline=None)
    @given(STRATEGIES[record_type])
    def check(record: object) -> None:
        assert codec.decode(codec.encode(record)) == record

    check()


def crc64_avro(data: bytes) -> int:
    """The Rabin fingerprint of the Avro specification, written out here independently of fastavro."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


@pytest.mark.parametrize("record_type", codec.RECORD_TYPES, ids=lambda t: t.__name__)
def test_plain_fastavro_decodes_with_only_the_avsc_and_the_header_rule(record_type: type) -> None:
    @settings(max_examples=10, deadline=None)
    @given(STRATEGIES[record_type])
    def check(record: object) -> None:
        check_plain_decode(record_type, record)

    check()


def check_plain_decode(record_type: type, record: object) -> None:
    data = codec.encode(record)
    schema = fastavro.schema.load_schema(str(codec.schema_path(record_type.__name__)))
    canonical = fastavro.schema.to_parsing_canonical_form(schema).encode()
    assert data[:2] == b"\xc3\x01"
    assert int.from_bytes(data[2:10], "little") == crc64_avro(canonical)
    body = fastavro.schemaless_reader(io.BytesIO(data[10:]), schema, None)
    first = fields(record_type)[0].name
    assert body[first] == getattr(record, first)


def test_crc64_matches_the_value_the_reference_avro_package_computes() -> None:
    import avro.schema

    text_schema = codec.schema_path("TaskStart").read_text()
    reference = avro.schema.parse(text_schema).fingerprint("CRC-64-AVRO")
    assert codec.codec_for(ev.TaskStart).header[2:] == reference


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "empty value"),
        (b"{\"job_id\": 1}", "not Avro single-object encoding"),
        (b"\xc3\x01" + b"\x00" * 8 + b"\x02", "unknown writer schema fingerprint"),
    ],
)
def test_garbage_is_rejected_with_a_reason(data: bytes | None, reason: str) -> None:
    with pytest.raises(codec.DecodeError, match=reason):
        codec.decode(data)


def test_truncated_and_padded_bodies_are_rejected() -> None:
    data = codec.encode(ev.TaskFinish("j", "t", 0, "n", 10, 5, ev.Status.SUCCEEDED))
    with pytest.raises(codec.DecodeError, match="corrupt TaskFinish"):
        codec.decode(data[:-3])
    with pytest.raises(codec.DecodeError, match="trailing bytes"):
        codec.decode(data + b"\x00")


def test_nan_features_survive_the_wire_for_validation_to_reject() -> None:
    record = ev.TaskCheckpoint("j", "t", 0, "n", 10, 5, {"cpu": math.nan})
    decoded = codec.decode(codec.encode(record))
    assert ev.validate(decoded) is not None and "cpu" in ev.validate(decoded)


def _with_ts(ts_zigzag: int) -> bytes:
    """A TaskFinish whose ``ts_us`` is the varint of ``ts_zigzag``, whatever its length (a corrupt writer's)."""
    data = codec.encode(ev.TaskFinish("j", "t", 0, "n", 5, 7, ev.Status.SUCCEEDED))
    varint = bytearray()
    while ts_zigzag >= 0x80:
        varint.append(ts_zigzag & 0x7F | 0x80)
        ts_zigzag >>= 7
    varint.append(ts_zigzag)
    at = data.index(b"\x0a", codec.HEADER_SIZE)  # ts_us = 5, zigzag 10, after the strings and the attempt
    return data[:at] + bytes(varint) + data[at + 1:]


@pytest.mark.parametrize("ts_us", [2**63, 2**64 + 5, 2**70, -(2**63) - 1])
def test_a_long_past_64_bits_is_rejected_not_wrapped(ts_us: int) -> None:
    """fastavro's C reader wraps such a varint (2**64 + 5 came back as 5): a corrupt timestamp taken for a valid
    one instead of a dead letter."""
    with pytest.raises(codec.DecodeError, match="beyond 64 bits"):
        codec.decode(_with_ts(ts_us * 2 if ts_us >= 0 else -ts_us * 2 - 1))


@pytest.mark.parametrize("ts_us", [2**63 - 1, -(2**63), 2**56])
def test_the_longest_valid_longs_decode(ts_us: int) -> None:
    record = ev.TaskFinish("j", "t", 0, "n", ts_us, 7, ev.Status.SUCCEEDED)
    assert codec.decode(codec.encode(record)) == record


def test_a_summary_whose_doubles_look_like_a_long_varint_is_read_at_c_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nine bytes of 0x80 and over come by chance in a summary's doubles: the C reader's body written back is
    the record's very bytes, so no long was past 64 bits and the pure-Python reader is not needed."""
    high = struct.unpack("<d", b"\x88" * 7 + b"\xc8")[0]  # all eight bytes over 0x80, so 16 in a row
    moments = tuple(ev.NodeMoments(f"n{i}", i, 3, high, high) for i in range(50))
    summary = ev.NodeSummary(0, 2, 3_600_000_000, 300_000_000, moments, ())
    data = codec.encode(summary)
    assert codec.MAYBE_OVERLONG.search(data, codec.HEADER_SIZE) is not None

    def no_pure_python(*args: object) -> object:
        raise AssertionError("read by the pure-Python reader")

    monkeypatch.setattr(codec._read_py, "schemaless_reader", no_pure_python)
    assert codec.decode(data) == summary
