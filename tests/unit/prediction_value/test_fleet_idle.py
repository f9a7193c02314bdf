"""A job's predictor goes when no event of it came for the idle timeout, or at its JobFinish, and at no other
time, whatever the order and spacing of the events (the fleet's heap holds a job once since session 16)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import Event, JobFinish, TaskStart
from streams.core.prediction.fleet import PredictorFleet

TIMEOUT = 3

steps = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 20), st.booleans()),
                 max_size=80)


def event(job: str, at: int, end: bool) -> Event:
    return JobFinish(job, at) if end else TaskStart(job, "t", 0, "n1", at)


@settings(max_examples=1000, deadline=None)
@given(steps, st.integers(0, 40))
def test_jobs_go_exactly_when_idle_past_the_timeout_or_ended(script: list[tuple[str, int, bool]],
                                                            restart_at: int) -> None:
    fleet = PredictorFleet("spark-q0.75-m1.5", job_idle_timeout_us=TIMEOUT)
    alive: dict[str, int] = {}  # the rule, written plainly: each running job's latest event time
    for index, (job, at, end) in enumerate(script):
        if index == restart_at:  # a restored fleet keeps the same rule
            restored = PredictorFleet("spark-q0.75-m1.5", job_idle_timeout_us=TIMEOUT)
            restored.restore(fleet.snapshot())
            fleet = restored
        fleet.step(event(job, at, end))
        if end:
            alive.pop(job, None)
        else:
            alive[job] = max(at, alive.get(job, at))
        alive = {j: last for j, last in alive.items() if last + TIMEOUT >= at}
        assert sorted(fleet._jobs) == sorted(alive), (index, job, at, end)
