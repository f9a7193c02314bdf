"""The compiled encode (replayed events, the direct worker's outputs) writes ``codec.encode``'s bytes exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import events as ev
from streams.serde import codec, fast_encode

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


# The direct worker's outputs (node samples, summaries, progress marks, node scores and classes, deltas,
# snapshots, predictions) go through the same compiled writers, arrays of records included.
OUTPUTS = (ev.NormalizedTask, ev.Progress, ev.NodeMoments, ev.NodeSummary, ev.NodeScore, ev.NodeClass,
           ev.StragglerPrediction, ev.BlacklistEntry, ev.RemovedEntry, ev.BlacklistDelta, ev.BlacklistSnapshot)


@pytest.mark.parametrize("record_type", OUTPUTS, ids=lambda t: t.__name__)
def test_the_outputs_are_compiled_and_written_as_the_codec_writes_them(record_type: type) -> None:
    assert fast_encode.compile_encoder(record_type) is not None

    @settings(max_examples=200, deadline=None)
    @given(st.from_type(record_type))
    def check(record: object) -> None:
        outcome = _outcome(fast_encode.encode, record)
        assert outcome == _outcome(codec.encode, record)
        if outcome[0] == "bytes":
            assert codec.encode(codec.decode(outcome[1])) == outcome[1]

    check()


def test_empty_and_long_arrays_are_fastavros_blocks() -> None:
    moments = tuple(ev.NodeMoments(f"n{i}", i * 10, i + 1, 0.5 * i, 0.25) for i in range(200))
    for added, removed in (((), ()), (moments, ()), (moments[:1], moments)):
        summary = ev.NodeSummary(1, 4, 3_600_000_000, 300_000_000, added, removed)
        assert fast_encode.encode(summary) == codec.encode(summary)
        assert codec.decode(fast_encode.encode(summary)) == summary


def test_node_scores_in_a_row_are_written_as_the_codec_writes_each() -> None:
    """NodeScore's own writer keeps its node strings and the last window's bytes: a window or a value that
    changes between scores, intervals absent or half there, values the writers do not vouch for."""
    nan, big = float("nan"), 1 << 40
    scores = [ev.NodeScore("n1", 0, 10, 1, 0.5, 0.0, None, None, 1.0),
              ev.NodeScore("n1", 0, 10, 3, -0.5, 2.0, -1.5, 0.5, 0.0),
              ev.NodeScore("n2", 0, 11, 16384, nan, float("inf"), -0.0, nan, 2.5),
              ev.NodeScore("n1", big, big + 10, 2, 0.5, 1.0, 0.25, None, 1.0),
              ev.NodeScore("é", -5, 1 << 62, -3, 1.0, 1.0, 0.0, 1.0, 3.0),
              ev.NodeScore("n2", 0, 10, 2, 1, 1.0, None, 1.0, 1.0),  # type: ignore[arg-type]
              ev.NodeScore("n2", 0, 10, True, 1.0, 1.0, None, None, 1.0),
              ev.NodeScore("n3", 0, 10, 1 << 63, 1.0, 1.0, None, None, 1.0),
              ev.NodeScore("n3", 0.5, 10, 1, 1.0, 1.0, None, None, 1.0),  # type: ignore[arg-type]
              ev.NodeScore("n1", 0, 10, 1, 0.5, 0.0, None, None, 1.0)]  # fmt: skip
    for score in scores:
        assert _outcome(fast_encode.encode, score) == _outcome(codec.encode, score), score
