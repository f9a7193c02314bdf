"""The scheduler simulation of SPEC 7 on hand-made jobs whose outcome can be worked out on paper."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.evaluation.avoidance import (
    Placement,
    avoid_blacklist,
    avoidance_by_job,
    compare_avoidance,
    listed,
    random_moves,
    spans_in_seconds,
)
from streams.core.evaluation.detection import Span
from streams.core.evaluation.simulation import TaskTimeline, first_flags, perfect_flags, simulate, timelines
from streams.core.events import JobStart, Status, StragglerPrediction, TaskCheckpoint, TaskFinish, TaskStart

S = 1_000_000


def job() -> dict[str, TaskTimeline]:
    """Three short tasks (10 s) and one straggler (100 s), all started at t=0, checkpoints every 10 s."""
    tasks = {name: TaskTimeline(0.0, 10.0, (10.0,)) for name in ("a", "b", "c")}
    tasks["slow"] = TaskTimeline(0.0, 100.0, tuple(float(t) for t in range(10, 101, 10)))
    return tasks


def constant(seconds: float):
    return lambda: seconds


def test_no_flag_leaves_the_trace_schedule_alone() -> None:
    outcome = simulate(job(), {}, constant(10.0), spares=None)
    assert outcome.jct_s == outcome.jct_base_s == 100.0
    assert outcome.reduction == 0.0 and outcome.relaunches == 0 and outcome.wasted_s == 0.0


def test_algorithm_2_relaunches_at_the_flag() -> None:
    outcome = simulate(job(), {"slow": 20.0}, constant(10.0), spares=None)
    assert outcome.jct_s == 30.0  # relaunched at 20 s, the copy needs 10 s
    assert outcome.reduction == pytest.approx(0.7)
    assert (outcome.relaunches, outcome.successes, outcome.wasted_s) == (1, 1, 20.0)


def test_a_wrong_flag_in_relaunch_mode_makes_the_job_later() -> None:
    """Terminating a task that was about to finish and drawing a long copy: the paper's schedulers pay for it."""
    outcome = simulate(job(), {"a": 9.0}, constant(95.0), spares=None)
    assert outcome.jct_s == 104.0 and outcome.reduction < 0
    assert outcome.successes == 0


def test_speculation_never_delays_a_task_with_unlimited_machines() -> None:
    outcome = simulate(job(), {"a": 9.0, "slow": 20.0}, constant(95.0), spares=None, mode="speculate")
    assert outcome.jct_s == 100.0  # both originals win their races
    assert outcome.successes == 0
    assert outcome.wasted_s == pytest.approx((10.0 - 9.0) + (100.0 - 20.0))  # the copies that lost


def test_algorithm_3_waits_for_a_machine_released_by_a_finished_task() -> None:
    tasks = job()
    # no spare: the straggler flagged at 5 s finds no machine; the short tasks release theirs at 10 s,
    # and the straggler asks again at its next checkpoint (10 s)
    outcome = simulate(tasks, {"slow": 5.0}, constant(10.0), spares=0)
    assert outcome.jct_s == 20.0 and outcome.relaunches == 1
    # with one spare it goes at once
    assert simulate(tasks, {"slow": 5.0}, constant(10.0), spares=1).jct_s == 15.0


def test_algorithm_3_leaves_flags_unserved_when_no_machine_comes() -> None:
    tasks = {"x": TaskTimeline(0.0, 50.0, (10.0, 20.0, 50.0)), "y": TaskTimeline(0.0, 60.0, (10.0, 60.0))}
    outcome = simulate(tasks, {"x": 10.0, "y": 10.0}, constant(5.0), spares=0)
    assert outcome.relaunches == 0 and outcome.unserved == 2 and outcome.jct_s == 60.0


def test_the_machine_of_a_terminated_task_is_not_reused() -> None:
    """One spare: the first relaunch takes it; the second flagged task must wait for the copy to end."""
    tasks = {
        "p": TaskTimeline(0.0, 100.0, (10.0, 20.0, 30.0, 100.0)),
        "q": TaskTimeline(0.0, 100.0, (10.0, 20.0, 30.0, 100.0)),
    }
    outcome = simulate(tasks, {"p": 10.0, "q": 10.0}, constant(15.0), spares=1)
    # p: relaunched at 10 s, copy ends 25 s and frees its machine; q asks at 10 and 20, gets it at 30 s
    assert outcome.jct_s == 45.0
    assert outcome.wasted_s == 10.0 + 30.0


@settings(max_examples=300, deadline=None)
@given(
    jobs=st.lists(st.tuples(st.integers(0, 50), st.integers(1, 200)), min_size=2, max_size=12),
    flagged=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 250)), max_size=6),
    draws=st.lists(st.integers(1, 200), min_size=1, max_size=5),
    spares=st.one_of(st.none(), st.integers(0, 3)),
)
def test_any_schedule_counts_add_up_and_speculation_never_ends_a_job_later(jobs, flagged, draws, spares) -> None:
    """Random waves of tasks (start, duration), flags at random times, both modes, any spares."""
    tasks = {
        str(i): TaskTimeline(float(s), float(s + d), tuple(float(s + t) for t in range(1, d + 1, max(1, d // 4))))
        for i, (s, d) in enumerate(jobs)
    }
    flags = {str(i): float(at) for i, at in flagged if i < len(jobs)}
    asked = {t for t, at in flags.items() if tasks[t].start_s <= at < tasks[t].finish_s}
    outcomes = {}
    for mode in ("relaunch", "speculate"):
        cycle = itertools.cycle(float(d) for d in draws)
        out = simulate(tasks, flags, lambda cycle=cycle: next(cycle), spares, mode=mode)
        assert out.relaunches + out.unserved == len(asked)
        assert 0 <= out.successes <= out.relaunches and out.wasted_s >= 0
        if spares is None:
            assert out.unserved == 0
        outcomes[mode] = out
    assert outcomes["speculate"].jct_s <= outcomes["speculate"].jct_base_s
    if spares is None:  # same relaunches, same draws: keeping the original can only help
        assert outcomes["speculate"].jct_s <= outcomes["relaunch"].jct_s


def test_draws_are_made_in_time_order_so_a_seeded_draw_is_reproducible() -> None:
    """Two flags given out of order: the earlier relaunch takes the first draw."""
    tasks = {"early": TaskTimeline(0.0, 100.0, (10.0, 100.0)), "late": TaskTimeline(0.0, 100.0, (50.0, 100.0))}
    draws = iter([1.0, 2.0])
    outcome = simulate(tasks, {"late": 50.0, "early": 10.0}, lambda: next(draws), spares=None)
    assert outcome.jct_s == 52.0  # early: 10 + 1, late: 50 + 2
    pool = [5.0, 10.0, 40.0]
    runs = []
    for _ in range(2):
        rng = random.Random("0/job/1")
        runs.append(simulate(job(), {"slow": 20.0, "a": 5.0}, lambda rng=rng: rng.choice(pool), spares=0))
    assert runs[0] == runs[1]


def test_tasks_the_trace_started_later_take_released_machines_first() -> None:
    """a (0-10) releases its machine at 10 and the trace starts c on it; with no spare, flagged b must wait
    for c's machine (20) and relaunch at its next checkpoint, 25, not at 15 on a machine c is using."""
    tasks = {
        "a": TaskTimeline(0.0, 10.0, (10.0,)),
        "c": TaskTimeline(10.0, 20.0, (20.0,)),
        "b": TaskTimeline(0.0, 100.0, (5.0, 15.0, 25.0, 100.0)),
    }
    assert simulate(tasks, {"b": 5.0}, constant(10.0), spares=0).jct_s == 35.0
    assert simulate(tasks, {"b": 5.0}, constant(10.0), spares=1).jct_s == 20.0  # b at once, ends 15; c ends 20


def test_a_task_the_trace_started_later_never_takes_a_spare() -> None:
    """b started at 5 s on a machine of the trace's; a, flagged at 10 s, takes the one spare. b took the spare before,
    so 1 to 5 spares gave what 0 gave on jobs whose tasks start in waves (`laggard simulate --spares 0,1,5`)."""
    tasks = {"a": TaskTimeline(0.0, 100.0, (10.0, 60.0, 100.0)), "b": TaskTimeline(5.0, 50.0, (50.0,))}
    none, one, two = (simulate(tasks, {"a": 10.0}, constant(10.0), spares=k).jct_s for k in (0, 1, 2))
    assert none == 70.0  # b's machine comes free at 50, a asks again at 60: relaunched then, ends at 70
    assert one == two == 50.0  # a relaunched at once, its copy ends at 20; b ends at 50


def test_the_task_that_waited_longest_gets_the_next_machine() -> None:
    tasks = {
        "short": TaskTimeline(0.0, 15.0, (15.0,)),
        "9": TaskTimeline(0.0, 100.0, (5.0, 20.0, 100.0)),
        "10": TaskTimeline(10.0, 100.0, (20.0, 100.0)),
    }
    outcome = simulate(tasks, {"9": 5.0, "10": 20.0}, constant(10.0), spares=0)
    # one machine comes free at 15; at 20 both ask: "9" has waited since 5, "10" only just flagged
    assert outcome.relaunches == 1 and outcome.unserved == 1
    assert outcome.wasted_s == 20.0  # "9" terminated after 20 s of work ("10" would have thrown away 10 s)


def test_timelines_and_flags_come_from_the_events_a_replayer_emits() -> None:
    events = [
        JobStart("j", 0, declared_tasks=2),
        TaskStart("j", "t1", 0, "n1", 0),
        TaskStart("j", "t2", 0, "n2", 1 * S),
        TaskCheckpoint("j", "t1", 0, "n1", 5 * S, 5 * S),
        TaskCheckpoint("j", "t2", 0, "n2", 6 * S, 5 * S),
        TaskFinish("j", "t1", 0, "n1", 8 * S, 8 * S, Status.SUCCEEDED),
        TaskCheckpoint("j", "t2", 0, "n2", 30 * S, 29 * S),
        TaskFinish("j", "t2", 0, "n2", 40 * S, 39 * S, Status.SUCCEEDED),
        TaskFinish("j", "t3", 0, "n3", 40 * S, 2 * S, Status.FAILED),
    ]
    tasks = timelines(events)
    assert tasks == {"t1": TaskTimeline(0.0, 8.0, (5.0,)), "t2": TaskTimeline(1.0, 40.0, (6.0, 30.0))}
    assert perfect_flags(tasks, {"t1": 8.0, "t2": 39.0}, tau_s=39.0) == {"t2": 6.0}
    flag = StragglerPrediction("j", "t2", 0, "n2", 30 * S, 29 * S, 1.0, 1.0, 1.0, 1.0, "nurd")
    later = StragglerPrediction("j", "t2", 0, "n2", 35 * S, 34 * S, 1.0, 1.0, 1.0, 1.0, "nurd")
    assert first_flags([flag, later]) == {"t2": 30.0}


# --- DSB's blacklisting in the loop -----------------------------------------------------------------------


def blacklist_job() -> list[Placement]:
    """Ten 10-s tasks on good nodes, and three tasks on node 'bad' (listed from t=100 s)."""
    good = [Placement(f"n{i}", float(i), 10.0) for i in range(10)]
    return [*good, Placement("bad", 50.0, 40.0), Placement("bad", 120.0, 40.0), Placement("bad", 130.0, 40.0)]


def test_only_tasks_that_start_while_their_node_is_listed_move() -> None:
    out = avoid_blacklist(blacklist_job(), {"bad": [(100.0, math.inf)]}, draw=lambda pool: pool[0])
    assert (out.moved, out.unmovable) == (2, 0)  # the task that started at 50 s ran before the listing
    assert out.moved_s_before == 80.0 and out.moved_s_after == 20.0
    assert out.jct_base_s == 170.0 and out.jct_s == 140.0  # last end 130 + 10 instead of 130 + 40


def test_a_node_taken_off_the_list_receives_tasks_again() -> None:
    out = avoid_blacklist(blacklist_job(), {"bad": [(100.0, 125.0)]}, draw=lambda pool: pool[0])
    assert out.moved == 1 and out.jct_s == out.jct_base_s  # the task at 130 s stays on 'bad' and ends last


def test_a_job_with_no_task_elsewhere_cannot_move() -> None:
    job = [Placement("bad", 10.0, 5.0), Placement("bad", 20.0, 5.0)]
    out = avoid_blacklist(job, {"bad": [(0.0, math.inf)]}, draw=lambda pool: pool[0])
    assert (out.moved, out.unmovable, out.reduction) == (0, 2, 0.0)


def test_draws_come_from_the_jobs_tasks_on_unlisted_nodes_stragglers_included() -> None:
    pools = []
    job = [*blacklist_job(), Placement("n0", 0.0, 500.0)]  # a straggler (>= p90) on a good node
    avoid_blacklist(job, {"bad": [(100.0, math.inf)]}, draw=lambda pool: pools.append(list(pool)) or pool[0])
    # the task on 'bad' that started before the listing is in the pool; the two that landed are not
    assert pools and all(pool == sorted([10.0] * 10 + [40.0, 500.0]) for pool in pools)


def test_random_moves_are_the_null_baseline_a_list_is_judged_against() -> None:
    job = blacklist_job()
    out = random_moves(job, 2, random.Random(3))
    assert out.moved == 2 and out.tasks == len(job)
    assert random_moves(job, 2, random.Random(3)) == out  # seeded


def test_lists_are_compared_over_the_same_jobs_and_beside_random_moves() -> None:
    jobs = {"hit": blacklist_job(), "clean": [Placement("n1", 0.0, 10.0), Placement("n2", 0.0, 12.0)]}
    found = {"bad": [(100.0, math.inf)]}
    both = compare_avoidance(jobs, {"found": found, "none": {}}, repeats=3, seed=1)
    assert (both["found"].jobs, both["found"].affected_jobs, both["found"].moved) == (2, 1, 2)
    assert both["found"].over_jobs == both["none"].over_jobs == 1  # the one job any list touched
    assert both["none"].mean_reduction == 0.0 and both["none"].moved == 0
    per_job = avoidance_by_job(jobs, found, repeats=3, seed=1)
    assert both["found"].mean_reduction == pytest.approx(per_job["hit"].reduction)
    assert per_job["clean"].reduction == per_job["clean"].baseline == 0.0
    assert compare_avoidance(jobs, {"found": found, "none": {}}, repeats=3, seed=1) == both  # reproducible


def test_spans_in_seconds_leave_open_stays_open() -> None:
    spans = [Span("a", 1_000_000, None), Span("b", 2_000_000, 3_000_000)]
    assert spans_in_seconds(spans) == {"a": [(1.0, math.inf)], "b": [(2.0, 3.0)]}
    assert listed(spans_in_seconds(spans), "b", 2.5) and not listed(spans_in_seconds(spans), "b", 3.0)
