"""A flag counts in the primary score only when it leaves time to act (issue #20), on hand-made jobs."""

from __future__ import annotations

import pytest

from streams.core.evaluation.prediction import score
from streams.core.evaluation.runner import evaluate_method, job_truths
from streams.core.events import Event, JobStart, Status, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import PredictionContext

S = 1_000_000


def _job(last_checkpoint_before_end_s: float) -> list[Event]:
    """18 tasks of 10 s and two stragglers of 200 s and 300 s, each checkpointed at 5 s and shortly before its end."""
    events: list[Event] = [JobStart("j", 0, declared_tasks=20)]
    for i, seconds in enumerate([10] * 18 + [200, 300]):
        end = seconds * S
        late = end - int(last_checkpoint_before_end_s * S)
        events += [TaskCheckpoint("j", f"t{i}", 0, "n", 5 * S, 5 * S, {}),
                   TaskCheckpoint("j", f"t{i}", 0, "n", late, late, {}),
                   TaskFinish("j", f"t{i}", 0, "n", end, end, Status.SUCCEEDED)]  # fmt: skip
    return events


def test_a_flag_one_second_before_the_end_is_late_for_every_lead_time_column() -> None:
    jobs = {"j": _job(last_checkpoint_before_end_s=1.0)}
    truths, _ = job_truths(jobs, initial_fraction=0.1)
    # elapsed-tau flags the 300 s task at its 299 s checkpoint, the first past tau = 200 s
    m = evaluate_method("elapsed-tau", jobs, truths, PredictionContext(), online=False)["j"].oracle
    assert (m.tp, m.fp) == (1, 0)
    assert m.f1 == pytest.approx(2 / 3)  # the paper's F1 counts it
    assert (m.in_time, m.f1_in_time) == (0, 0.0)  # a copy started at 299 s, needing 10 s, ends after 300 s
    assert m.f1_at == {0.25: 0.0, 0.5: 0.0, 0.75: 0.0}


def test_the_same_straggler_flagged_early_counts_everywhere() -> None:
    durations = {"s": 300.0, **{f"n{i}": 10.0 for i in range(9)}}
    m = score(durations, {"s": 50.0}, initial=set(), tau=200.0, relaunch=10.0)
    assert m.f1_in_time == m.f1 == m.f1_at[0.25] == 1.0  # 50 s is before 25 % of 300 s, and 50 + 10 < 300


@pytest.mark.parametrize(
    ("flag_s", "counted"),
    [(80.0, {0.25: 0, 0.5: 1, 0.75: 1}), (160.0, {0.25: 0, 0.5: 0, 0.75: 1}), (230.0, {0.25: 0, 0.5: 0, 0.75: 0})],
)
def test_the_fraction_columns_count_flags_before_that_share_of_the_duration(
    flag_s: float, counted: dict[float, int]
) -> None:
    m = score({"s": 300.0, "n": 10.0}, {"s": flag_s}, initial=set(), tau=200.0)
    assert {f: round(v) for f, v in m.f1_at.items()} == counted  # F1 is 1 with the flag counted, else 0


def test_false_positives_cost_every_column_the_same() -> None:
    durations = {"s": 300.0, "n1": 10.0, "n2": 10.0}
    m = score(durations, {"s": 10.0, "n1": 5.0}, initial=set(), tau=200.0, relaunch=10.0)
    assert m.f1 == m.f1_in_time == m.f1_at[0.5] == pytest.approx(2 / 3)
