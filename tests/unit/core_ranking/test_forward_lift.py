"""Forward lift (SPEC 7): which tasks count as landing on a blacklisted node, and the rates."""

from __future__ import annotations

import pytest

from streams.core.evaluation.lift import ForwardLift, wilson
from streams.core.events import BlacklistDelta, BlacklistEntry, RemovedEntry, Status, TaskFinish

S = 1_000_000


def delta(version: int, at_s: int, added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> BlacklistDelta:
    entries = tuple(BlacklistEntry(n, 0, 9, 1.0, 0.5, 0.6, 1.4, "slow") for n in added)
    gone = tuple(RemovedEntry(n, "no recent evidence") for n in removed)
    return BlacklistDelta("c", version, at_s * S, "pcores", 0, at_s * S, entries, gone)


def finish(task: str, node: str, start_s: int, seconds: int, job: str = "j") -> TaskFinish:
    return TaskFinish(job, task, 0, node, (start_s + seconds) * S, seconds * S, Status.SUCCEEDED)


def test_only_tasks_started_while_their_node_was_listed_land_on_it() -> None:
    lift = ForwardLift()
    lift.observe_delta(delta(1, 100, added=("bad",)))
    lift.observe_delta(delta(2, 300, removed=("bad",)))
    # ten 10 s tasks elsewhere; on "bad": one long task before listing, one while listed, one after removal
    for i in range(10):
        lift.observe(finish(f"ok{i}", f"n{i}", 150, 10))
    lift.observe(finish("before", "bad", 90, 40))  # started before the delta: evidence time, not outcome
    lift.observe(finish("during", "bad", 200, 40))
    lift.observe(finish("after", "bad", 350, 40))
    result = lift.result()
    # "before" started before the first delta, so it is outside the measured period altogether
    assert (result.tasks, result.landed, result.nodes) == (12, 1, 1)
    assert result.stragglers == 2  # p90 of the 13 durations is 40 s: "before" is one too, but not counted
    assert (result.landed_stragglers, result.landed_rate) == (1, 1.0)
    assert result.cluster_rate == pytest.approx(2 / 12)
    assert result.lift == pytest.approx(6.0)
    assert result.other_rate == pytest.approx(1 / 11)


def test_failed_tasks_do_not_count_and_no_blacklist_means_no_lift() -> None:
    lift = ForwardLift()
    lift.observe(TaskFinish("j", "t", 0, "n", 10 * S, 5 * S, Status.FAILED))
    lift.observe(finish("a", "n", 0, 5))
    result = lift.result()
    assert (result.tasks, result.lift, result.lift_low) == (0, None, None)


@pytest.mark.parametrize(("k", "n"), [(81, 263), (0, 12), (12, 12), (3, 7)])
def test_wilson_interval_agrees_with_scipy(k: int, n: int) -> None:
    from scipy.stats import binomtest

    expected = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(k, n) == pytest.approx((expected.low, expected.high), abs=1e-9)


def test_wilson_of_nothing_is_everything() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


# --- which jobs define stragglers (issue 14) ----------------------------------------------------------


def test_single_task_jobs_define_no_straggler() -> None:
    """A job with fewer than 2 successful tasks has no p90 to straggle behind (as SPEC 3 for z-values)."""
    lift = ForwardLift()
    lift.observe_delta(delta(1, 100, added=("bad",)))
    for i in range(10):
        lift.observe(finish("only", "bad" if i < 3 else f"n{i}", 150, 10 + i, job=f"single{i}"))
    result = lift.result()
    assert (result.tasks, result.stragglers, result.cluster_rate, result.lift) == (0, 0, None, None)


def test_single_task_jobs_do_not_dilute_or_inflate_the_cluster_rate() -> None:
    lift = ForwardLift()
    lift.observe_delta(delta(1, 100, added=("bad",)))
    for i in range(10):  # one job of ten tasks: the 40 s one straggles
        lift.observe(finish(f"t{i}", "bad" if i == 9 else f"n{i}", 150, 40 if i == 9 else 10))
    for i in range(10):
        lift.observe(finish("only", f"n{i}", 150, 10, job=f"single{i}"))
    result = lift.result()
    assert (result.tasks, result.stragglers) == (10, 1)
    assert result.cluster_rate == pytest.approx(0.1)
    assert result.lift == pytest.approx(10.0)


def test_a_job_whose_tasks_all_took_the_same_time_defines_no_straggler() -> None:
    """std = 0: every task sits at the p90, and none of them is slower than its siblings."""
    lift = ForwardLift()
    lift.observe_delta(delta(1, 100))
    for i in range(5):
        lift.observe(finish(f"t{i}", f"n{i}", 150, 10))
    assert (lift.result().tasks, lift.result().stragglers) == (0, 0)


def test_the_straggler_threshold_is_the_prediction_oracle_p90() -> None:
    """One p90 formula for the whole project: lift's stragglers are the prediction metrics' stragglers."""
    from streams.core.evaluation.prediction import oracle_tau

    durations = [3, 7, 7, 8, 12, 15, 15, 15, 21, 40, 41]
    lift = ForwardLift()
    lift.observe_delta(delta(1, 100))
    for i, seconds in enumerate(durations):
        lift.observe(finish(f"t{i}", f"n{i}", 150, seconds))
    tau = oracle_tau(durations)
    assert lift.result().stragglers == sum(d >= tau for d in durations)
