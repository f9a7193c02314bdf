"""Prediction metrics of SPEC 7 on hand-made jobs."""

from __future__ import annotations

import pytest

from streams.core.evaluation.prediction import job_truth, oracle_tau, score
from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish


def test_oracle_tau_is_the_element_at_int_0_9_n() -> None:
    assert oracle_tau([5.0, 1.0, 3.0, 2.0, 4.0]) == 5.0  # int(4.5) = 4 -> the largest
    assert oracle_tau([float(i) for i in range(20)]) == 18.0


def test_each_task_counts_once_and_the_initial_set_leaves_the_fpr() -> None:
    durations = {"s1": 100.0, "s2": 120.0, "s3": 90.0, "n1": 10.0, "n2": 20.0, "n3": 30.0, "i1": 5.0}
    flags = {
        "s1": 40.0,  # straggler flagged early: TP
        "s2": 120.0,  # straggler flagged on its finishing checkpoint: late, so FN
        "n1": 5.0,  # non-straggler flagged: FP
        "i1": 1.0,  # initial training task: left out of the FPR
    }
    m = score(durations, flags, initial={"i1"}, tau=90.0)
    assert (m.tp, m.fn, m.fp, m.tn, m.late) == (1, 2, 1, 2, 1)
    assert m.n_stragglers == 3
    assert m.tpr == pytest.approx(1 / 3)
    assert m.fnr == pytest.approx(2 / 3)
    assert m.fpr == pytest.approx(1 / 3)  # n1 of n1, n2, n3
    assert m.f1 == pytest.approx(2 * 1 / (2 * 1 + 1 + 2))
    assert m.flag_time == pytest.approx(0.4)


def test_no_flags_means_zero_rates_not_errors() -> None:
    m = score({"a": 1.0, "b": 2.0}, {}, initial=set(), tau=2.0)
    assert (m.tpr, m.fpr, m.f1, m.flag_time) == (0.0, 0.0, 0.0, None)


def test_truth_takes_the_first_finishers_as_the_initial_set() -> None:
    events = [JobStart("j", 0, declared_tasks=4)]
    for i, seconds in enumerate([3, 1, 4, 2]):
        us = seconds * 1_000_000
        events.append(TaskCheckpoint("j", f"t{i}", 0, "n", us, us, {"x": 1.0}))
    finishes = sorted(
        (
            TaskFinish("j", f"t{i}", 0, "n", s * 1_000_000, s * 1_000_000, Status.SUCCEEDED)
            for i, s in enumerate([3, 1, 4, 2])
        ),
        key=lambda e: e.ts_us,
    )
    truth = job_truth(events + finishes, initial_fraction=0.5)
    assert truth.initial == {"t1", "t3"}  # the two fastest (ceil(0.5 * 4))
    assert truth.tau_s == 4.0
    assert truth.durations_s["t0"] == 3.0


def test_a_flag_counts_in_time_only_when_a_relaunch_at_it_would_finish_first() -> None:
    durations = {"s1": 100.0, "s2": 100.0, "n1": 10.0, "n2": 20.0}
    flags = {"s1": 30.0, "s2": 80.0, "n1": 5.0}  # relaunch takes 50: s1 would be beaten (80 < 100), s2 not (130)
    m = score(durations, flags, initial=set(), tau=90.0, relaunch=50.0)
    assert (m.tp, m.in_time) == (2, 1)
    assert m.f1 == pytest.approx(2 * 2 / (2 * 2 + 1 + 0))
    assert m.f1_in_time == pytest.approx(2 * 1 / (2 * 1 + 1 + 1))  # s2 counts as missed, the FP stays
    assert score(durations, flags, initial=set(), tau=90.0).in_time is None


def test_truth_knows_the_median_latency_a_relaunch_is_taken_to_need() -> None:
    events = [TaskFinish("j", f"t{i}", 0, "n", s * 1_000_000, s * 1_000_000, Status.SUCCEEDED)
              for i, s in enumerate([1, 2, 3, 10])]  # fmt: skip
    assert job_truth(events, initial_fraction=0.25).median_s == 2.5
