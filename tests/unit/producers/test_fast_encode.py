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
