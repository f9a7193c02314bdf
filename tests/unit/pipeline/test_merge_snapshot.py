"""A checkpoint of the merge buffer holds every held event exactly, whatever its type (session 10 made writing it
~10x cheaper: a catch-up holds tens of thousands of events and each checkpoint writes them all)."""

from __future__ import annotations

import dataclasses

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart
from streams.core.merge import MergeBuffer, event_row

ids = st.sampled_from(["j1", "j2", "t0", "n7"])
times = st.integers(0, 50)
events = st.one_of(
    st.builds(TaskStart, ids, ids, st.integers(0, 3), ids, times, st.booleans(), st.sampled_from(["", "map"]),
              st.none() | st.floats(0, 4), st.none() | st.floats(0, 4), st.none() | st.integers(0, 9),
              st.none() | st.integers(0, 3)),
    st.builds(TaskCheckpoint, ids, ids, st.integers(0, 3), ids, times, times,
              st.dictionaries(st.sampled_from(["cpu", "mem"]), st.floats(0, 1))),
    st.builds(TaskFinish, ids, ids, st.integers(0, 3), ids, times, times, st.sampled_from(list(Status))),
    st.builds(JobStart, ids, times, st.none() | st.integers(0, 9)),
    st.builds(JobFinish, ids, times),
)


def field_by_field(event: object) -> list[object]:
    """The row as it was written before session 10 (one ``dataclasses.fields`` per event)."""
    row = [getattr(event, f.name) for f in dataclasses.fields(event)]  # type: ignore[arg-type]
    if isinstance(event, TaskFinish):
        row[-1] = event.status.value
    if isinstance(event, TaskCheckpoint):
        row[-1] = dict(event.features)
    return row


@settings(max_examples=60, deadline=None)
@given(st.lists(events, max_size=30))
def test_a_restored_buffer_releases_the_same_events_in_the_same_order(held: list[object]) -> None:
    buffer = MergeBuffer(wait_for_job_events=True)
    for event in held:
        buffer.receive(event)  # type: ignore[arg-type]
    state = orjson.loads(orjson.dumps(buffer.snapshot()))  # as it travels in a checkpoint
    assert [row[4] for row in state["pending"]] == orjson.loads(orjson.dumps(
        [field_by_field(e) for _, _, _, e in sorted(buffer._pending, key=lambda item: item[:3])]))
    restored = MergeBuffer(wait_for_job_events=True)
    restored.restore(state)
    assert list(restored.release(10**9)) == list(buffer.release(10**9))
    assert all(event_row(e) == field_by_field(e) for e in held)
