"""The compiled decode returns ``codec.decode``'s record for every event it reads, and on corrupted bytes the same
record or the same ``DecodeError`` (its reason included) as the codec."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import events as ev
from streams.serde import codec, fast_decode
from tests.unit.serde.test_fast_encode import EVENTS

OUTPUTS = st.one_of(st.from_type(ev.NormalizedTask), st.from_type(ev.Progress), st.from_type(ev.NodeScore))


def _outcome(decode: object, data: bytes) -> tuple[object, ...]:
    try:
        record = decode(data)  # type: ignore[operator]
    except codec.DecodeError as exc:
        return "error", re.sub(r"0x[0-9a-f]+", "0x...", str(exc))  # fastavro's messages name its stream
    return "record", type(record), repr(record)  # repr: a NaN equals itself


@pytest.mark.parametrize("record_type", list(EVENTS), ids=lambda t: t.__name__)
def test_the_event_types_are_compiled(record_type: type) -> None:
    assert fast_decode.compile_decoder(record_type) is not None


def test_a_type_with_a_map_or_arrays_goes_to_the_codec() -> None:
    assert fast_decode.compile_decoder(ev.TaskCheckpoint) is None
    assert fast_decode.compile_decoder(ev.NodeSummary) is None
    summary = ev.NodeSummary(0, 2, 60, 10, (ev.NodeMoments("n1", 0, 3, 0.5, 0.1),), ())
    assert fast_decode.decode(codec.encode(summary)) == summary


@pytest.mark.parametrize("record_type", list(EVENTS), ids=lambda t: t.__name__)
def test_every_event_decodes_to_the_codecs_record(record_type: type) -> None:
    @settings(max_examples=300, deadline=None)
    @given(EVENTS[record_type])
    def check(event: object) -> None:
        data = codec.encode(event)
        assert fast_decode.decode(data) == codec.decode(data) == event

    check()


events_and_outputs = st.one_of(*EVENTS.values(), OUTPUTS)
# A corruption: bytes overwritten, cut off, added, or taken out, anywhere, the header included.
edits = st.lists(st.tuples(st.sampled_from(["set", "cut", "add", "drop"]), st.integers(0, 200), st.binary(max_size=9)),
                 min_size=1, max_size=3)


def _corrupt(data: bytes, changes: list[tuple[str, int, bytes]]) -> bytes:
    out = bytearray(data)
    for how, where, what in changes:
        at = where % (len(out) + 1)
        if how == "set":
            out[at:at + len(what)] = what
        elif how == "cut":
            del out[at:]
        elif how == "add":
            out[at:at] = what
        else:
            del out[at:at + len(what) + 1]
    return bytes(out)


@settings(max_examples=2000, deadline=None)
@given(events_and_outputs, edits)
def test_corrupted_bytes_decode_or_fail_as_the_codec_says(record: object, changes: list[tuple[str, int, bytes]]
                                                          ) -> None:
    try:
        data = codec.encode(record)
    except (OverflowError, ValueError, TypeError):
        return  # a value the codec cannot write (from_type draws any int)
    broken = _corrupt(data, changes)
    assert _outcome(fast_decode.decode, broken) == _outcome(codec.decode, broken)


@pytest.mark.parametrize("data", [
    None, b"", b"\xc3", b"\xc3\x01" + b"\x00" * 8,
    codec.encode(ev.JobFinish("j", 5))[:10] + b"\x02j\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # > 64 bits
    codec.encode(ev.JobStart("j", 5, 3))[:-1] + b"\x04",  # union index 2
    codec.encode(ev.JobStart("j", 5, None))[:-1] + b"\x01",  # union index -1
    codec.encode(ev.JobStart("j", 5, 3))[:-1] + b"\x02\xfe\xff\xff\xff\x1f",  # an int beyond 32 bits
    codec.encode(ev.JobFinish("j", 5)) + b"\x00",  # trailing byte
    codec.encode(ev.JobFinish("j", 5))[:10] + b"\x03",  # a negative length
    codec.encode(ev.JobFinish("j", 5))[:10] + b"\x04\xff\xfe\x0a",  # invalid UTF-8
], ids=["none", "empty", "short", "unknown-fingerprint", "varint-over-64-bits", "union-2", "union-minus-1",
        "int-over-32-bits", "trailing", "negative-length", "invalid-utf8"])
def test_the_edge_cases_are_the_codecs(data: bytes | None) -> None:
    assert _outcome(fast_decode.decode, data) == _outcome(codec.decode, data)  # type: ignore[arg-type]


def test_an_enum_symbol_missing_from_status_leaves_the_type_to_the_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    # A writer schema may gain a status before events.Status does: compiling must not fail (the module is
    # imported by every worker), the type just goes to the codec.
    codec_for = codec.codec_for
    real = codec_for(ev.TaskFinish)
    schema = {**real.schema, "fields": [
        {**field, "type": {**field["type"], "symbols": [*field["type"]["symbols"], "PAUSED"]}}
        if isinstance(field["type"], dict) else field for field in real.schema["fields"]]}

    class NewerCodec:
        def __init__(self) -> None:
            self.schema = schema

    monkeypatch.setattr(codec, "codec_for", lambda record_type: NewerCodec() if record_type is ev.TaskFinish
                        else codec_for(record_type))
    assert fast_decode.compile_decoder(ev.TaskFinish) is None
    assert fast_decode.compile_decoder(ev.JobStart) is not None


def test_a_broken_decoder_fails_loudly_instead_of_falling_back(monkeypatch: pytest.MonkeyPatch) -> None:
    data = codec.encode(ev.JobFinish("j", 5))

    def broken(_: bytes) -> object:
        raise KeyError("a defect in the compiled loop")

    monkeypatch.setitem(fast_decode._DECODERS, data[: codec.HEADER_SIZE], broken)
    with pytest.raises(KeyError, match="defect"):
        fast_decode.decode(data)


def test_malformed_bytes_still_fall_back_to_the_codec() -> None:
    data = codec.encode(ev.TaskFinish("j", "t", 0, "n", 5, 4, ev.Status.SUCCEEDED))
    # A body cut inside its double-free fields raises IndexError in the loop; the codec gives its DecodeError.
    with pytest.raises(codec.DecodeError):
        fast_decode.decode(data[:-3])


BATCHES = st.lists(st.tuples(st.integers(0, 2**62), st.one_of(EVENTS[ev.TaskStart], EVENTS[ev.TaskFinish])),
                   max_size=4).map(lambda pairs: ev.TaskEventBatch(
                       "task-events:1", tuple(o for o, _ in pairs), tuple(e for _, e in pairs)))


@settings(max_examples=1000, deadline=None)
@given(BATCHES, edits)
def test_forwarded_batches_decode_or_fail_as_the_codec_says(batch: ev.TaskEventBatch,
                                                            changes: list[tuple[str, int, bytes]]) -> None:
    """A batch is a frame of single-object encodings: read here by fastavro and this module, by the codec through
    its own path; whole, both give the batch, and corrupted (frame or event) the same record or error."""
    data = codec.encode_forwarded(batch.source, list(batch.offsets), [codec.encode(e) for e in batch.events])
    assert fast_decode.decode(data) == codec.decode(data) == batch
    broken = _corrupt(data, changes)
    assert _outcome(fast_decode.decode, broken) == _outcome(codec.decode, broken)


def test_a_batch_inside_a_batch_is_refused_by_its_header_not_decoded_level_by_level() -> None:
    """An event of a batch must carry a task event's header: nested batches, each level decoded again by the
    fallback below it, cost the review 92 s for a 96 KB record before this check."""
    start = codec.encode(ev.TaskStart("j", "t", 0, "n1", 5))
    data = codec.encode_forwarded("task-events:0", [1], [start])
    for depth in range(3000):
        data = codec.encode_forwarded("task-events:0", [depth], [data])
    outcome = _outcome(fast_decode.decode, data)
    assert outcome == _outcome(codec.decode, data)
    # refused at the first level by its header (decoded level by level, the inner batches would have decoded)
    assert outcome[0] == "error" and "not a task event" in str(outcome[1])
