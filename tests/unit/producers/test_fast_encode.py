"""The replayer's compiled encode writes exactly ``codec.encode``'s bytes, which ``codec.decode`` reads back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producers import fast_encode
from streams.core import events as ev
from streams.serde import codec

# Signed and unsigned, up to the limits of Avro's int and long: the varints' long forms and negative zigzags.
text = st.text(max_size=20)
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
doubles = st.none() | st.floats(allow_nan=False, width=64)
EVENTS = {
    ev.TaskStart: st.builds(ev.TaskStart, text, text, ints, text, longs, st.booleans(), text, cpu_request=doubles,
                            memory_request=doubles, priority=st.none() | ints, scheduling_class=st.none() | ints),
    ev.TaskFinish: st.builds(ev.TaskFinish, text, text, ints, text, longs, longs, st.sampled_from(ev.Status)),
    ev.JobStart: st.builds(ev.JobStart, text, longs, st.none() | ints),
    ev.JobFinish: st.builds(ev.JobFinish, text, longs),
}


@pytest.mark.parametrize("record_type", list(EVENTS), ids=lambda t: t.__name__)
def test_the_replayed_event_types_are_compiled_not_handed_to_the_codec(record_type: type) -> None:
    assert fast_encode.compile_encoder(record_type) is not None


@pytest.mark.parametrize("record_type", list(EVENTS), ids=lambda t: t.__name__)
def test_bytes_are_the_codecs_and_decode_to_the_event(record_type: type) -> None:
    @settings(max_examples=300, deadline=None)
    @given(EVENTS[record_type])
    def check(event: object) -> None:
        data = fast_encode.encode(event)
        assert data == codec.encode(event)
        assert codec.decode(data) == event

    check()


def test_a_type_it_does_not_compile_goes_through_the_codec() -> None:
    checkpoint = ev.TaskCheckpoint("j", "t", 0, "n", 5, 3, {"cpu": 0.5})  # a map field: not compiled
    assert fast_encode.compile_encoder(ev.TaskCheckpoint) is None
    assert fast_encode.encode(checkpoint) == codec.encode(checkpoint)
    assert codec.decode(fast_encode.encode(checkpoint)) == checkpoint


# Values the events must not hold, but a reader's bug could give: beyond 64 bits, bools, floats where ints go,
# ints and bools where doubles go, NaN and infinities. The compiled encode must write what the codec writes, or
# raise the kind of error the codec raises.
wild_ints = (st.integers() | st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from([2**31, -(2**31) - 1,
             2**63, -(2**63) - 1]) | st.booleans() | st.floats())  # fmt: skip
wild_doubles = st.floats() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
WILD = {
    ev.TaskStart: st.builds(ev.TaskStart, text, text, wild_ints, text, wild_ints, st.booleans(), text,
                            cpu_request=st.none() | wild_doubles, memory_request=st.none() | wild_doubles,
                            priority=st.none() | wild_ints, scheduling_class=st.none() | wild_ints),
    ev.TaskFinish: st.builds(ev.TaskFinish, text, text, wild_ints, text, wild_ints, wild_ints,
                             st.sampled_from(ev.Status)),
    ev.JobStart: st.builds(ev.JobStart, text, wild_ints, st.none() | wild_ints),
    ev.JobFinish: st.builds(ev.JobFinish, text, wild_ints),
}


def _outcome(encode: object, event: object) -> tuple[str, object]:
    try:
        return "bytes", encode(event)  # type: ignore[operator]
    except Exception as exc:  # the kind of error is what is compared
        return "error", type(exc)


@pytest.mark.parametrize("record_type", list(WILD), ids=lambda t: t.__name__)
def test_invalid_values_are_written_or_refused_as_the_codec_does(record_type: type) -> None:
    @settings(max_examples=400, deadline=None)
    @given(WILD[record_type])
    def check(event: object) -> None:
        assert _outcome(fast_encode.encode, event) == _outcome(codec.encode, event)

    check()


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (ev.JobFinish("j", 2**63), OverflowError),
        (ev.JobFinish("j", -(2**63) - 1), OverflowError),
        (ev.TaskStart("j", "t", 0, "n", 5, False, "u", cpu_request=True), ValueError),
    ],
    ids=["long-2^63", "long-below--2^63", "bool-as-double"],
)
def test_the_reviewers_cases_raise_the_codecs_error(event: object, error: type) -> None:
    with pytest.raises(error):
        codec.encode(event)
    with pytest.raises(error):
        fast_encode.encode(event)


def test_a_float_in_a_long_field_is_written_as_the_codec_writes_it() -> None:
    event = ev.JobFinish("j", 1.5)  # type: ignore[arg-type]
    assert fast_encode.encode(event) == codec.encode(event)
