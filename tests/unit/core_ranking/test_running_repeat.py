"""Session 10's listing rule for the window and the scans (issue 21): on heterogeneous hardware a node passing a
scale once, at a low z against the cluster's spread of node effects, is not listed; one passing three consecutive
looks is; one beyond the spread level is listed at once. Judged through ``RunningTaskDetector._judge`` with set
tallies, so the z, the spread and the looks are exactly the ones named."""

from __future__ import annotations

import json
import random
import re

from streams.core.detection.base import Evidence, WindowView, observe_task
from streams.core.detection.running import RunningTaskDetector
from streams.core.detection.scales import Scale, Tally
from streams.core.events import Event, Status, TaskFinish, TaskStart

MIN = 60_000_000
TAU2 = 0.0352  # a spread of +-0.19 job std between healthy nodes (hetero-wide's is 0.17-0.21)
# Over 25 finished tasks' worth of information: plain z 4.8 is z 3.5 against that spread; plain z 6.0 is 4.38.
# ``scaled``: the effect in log duration at a job spread of 0.5 (times the information): 1.62x, 1.82x, 1.10x, past
# the shipped detector's duration floor (RUNNING_MIN_RATIO) but QUIET.
LUCKY = Tally(tasks=30, running=5, past_median=20, total=24.0, information=25.0, scaled=12.0)
BEYOND = Tally(tasks=30, running=5, past_median=20, total=30.0, information=25.0, scaled=15.0)
QUIET = Tally(tasks=30, running=5, past_median=15, total=5.0, information=25.0, scaled=2.5)  # z 1.0


def window_detector(repeat: int = 3, at_once: float | None = 4.3) -> RunningTaskDetector:
    """The window, looked at every 5 minutes, needing ``repeat`` of its looks (``repeat_us`` that many times 5 min)."""
    scale = Scale(60 * MIN, every_us=5 * MIN, repeat_us=repeat * 5 * MIN, at_once=at_once)
    det = RunningTaskDetector((scale,), z_list=4.6, period_us=MIN)
    det.observe(TaskStart("j", "t", 0, "n1", 0))  # the first event time: the warm-up (0 here) counts from it
    return det


def listed_at(det: RunningTaskDetector, looks: dict[int, Tally], last: int) -> tuple[int | None, str]:
    """Judge node n1 at every minute 1..last with the tally given for that minute (QUIET where none is)."""
    for minute in range(1, last + 1):
        evidence = det._judge("n1", [looks.get(minute, QUIET)], minute * MIN, lambda: TAU2)
        if evidence.suspect:
            return minute, evidence.reason
    return None, ""


def test_a_node_passing_the_window_once_at_a_low_z_against_the_spread_is_not_listed() -> None:
    # Lucky highs at minutes 5 and 15, a quiet look at 10 between them: no run of three, never listed.
    assert listed_at(window_detector(), {5: LUCKY, 10: QUIET, 15: LUCKY}, 30) == (None, "")
    # The shipped rule of session 9 (no repeat) lists it at its first pass.
    assert listed_at(window_detector(repeat=1, at_once=None), {5: LUCKY}, 30)[0] == 5


def test_a_node_passing_three_consecutive_looks_is_listed_at_the_third() -> None:
    # The scale looks every 5 minutes: minutes between its looks neither count nor break the run.
    looks = {m: LUCKY for m in range(5, 16)}
    minute, reason = listed_at(window_detector(), looks, 30)
    assert minute == 15
    assert "3 consecutive looks passed" in reason


def test_a_node_beyond_the_spread_level_is_listed_at_once() -> None:
    minute, reason = listed_at(window_detector(), {5: BEYOND}, 30)
    assert minute == 5
    assert "at once" in reason and "z 4.4 >= 4.3" in reason
    assert listed_at(window_detector(at_once=None), {5: BEYOND}, 30) == (None, "")  # no at-once level: not yet


def test_the_run_of_passing_looks_survives_a_snapshot() -> None:
    # A worker restarted between the second and third passing look lists the node at the third, as one that ran on.
    det = window_detector()
    assert listed_at(det, {5: LUCKY, 10: LUCKY}, 10) == (None, "")
    again = window_detector()
    again.restore(det.snapshot())
    assert again._judge("n1", [LUCKY], 15 * MIN, lambda: TAU2).suspect


def test_a_look_at_which_the_node_has_no_tally_breaks_its_run() -> None:
    # Two passing looks, then a look at which n1 has no usable task (its only task's job is too small to judge):
    # as a failed look would, it ends the run, so n1 needs three more passing looks, not one.
    det = window_detector()
    assert listed_at(det, {5: LUCKY, 10: LUCKY}, 10) == (None, "")
    assert "n1" not in det.detect(WindowView(0, 15 * MIN, {}))
    for minute in (20, 25):
        assert not det._judge("n1", [LUCKY], minute * MIN, lambda: TAU2).suspect
    assert det._judge("n1", [LUCKY], 30 * MIN, lambda: TAU2).suspect


def test_the_policy_asks_it_of_the_window_and_the_scans_but_not_of_three_windows() -> None:
    from streams.core.detection.registry import RUNNING_AT_ONCE_SCAN, RUNNING_AT_ONCE_WINDOW, running_detector
    from streams.core.ranking_config import RankingConfig

    scales = running_detector(RankingConfig(period_us=MIN)).scales
    rules = {(s.window_us // MIN, s.repeat_us, s.at_once) for s in scales}
    assert {(10, 3 * MIN, RUNNING_AT_ONCE_SCAN), (20, 3 * MIN, RUNNING_AT_ONCE_SCAN),
            (60, 15 * MIN, RUNNING_AT_ONCE_WINDOW), (180, None, None)} <= rules


# --- session 11: the persistence in event time, and the counters' life cycle ------------------------------------

# At a job spread of 0.5 (``scaled`` as above): 1.82x and 1.90x.
SCAN_PASS = Tally(tasks=30, running=5, past_median=20, total=30.0, information=25.0, scaled=15.0)  # z 6.0: 4.38 vs TAU2
SCAN_BEYOND = Tally(tasks=30, running=5, past_median=20, total=32.0, information=25.0, scaled=16.0)  # z 6.4: 4.67
RECOVERED = Tally(tasks=30, running=5, past_median=10, total=0.0, information=25.0, scaled=0.0)


def policy_detector(period_min: int) -> RunningTaskDetector:
    """The shipped detector (``registry.running_detector``) at a ``period_min``-minute ranking period, its event
    time starting at 0 (its 60-minute warm-up is over at minute 60)."""
    from streams.core.detection.registry import running_detector
    from streams.core.ranking_config import RankingConfig

    det = running_detector(RankingConfig(period_us=period_min * MIN))
    assert isinstance(det, RunningTaskDetector)
    det.observe(TaskStart("j", "t", 0, "n1", 0))
    return det


def policy_tallies(det: RunningTaskDetector, passing: dict[int, Tally]) -> list[Tally]:
    """A tally per scale of ``det``: QUIET but the scales given by window minutes (20: the 20-minute scan; 60: the
    window; 180: both three-window scales)."""
    return [passing.get(s.window_us // MIN, QUIET) for s in det.scales]


def policy_listed_at(period_min: int, passing: dict[int, Tally], first: int, last: int) -> tuple[int | None, str]:
    """Judge n1 at every boundary from minute ``first`` to ``last`` with ``passing`` there; the first listing."""
    det = policy_detector(period_min)
    for minute in range(first, last + 1, period_min):
        evidence = det._judge("n1", policy_tallies(det, passing), minute * MIN, lambda: TAU2)
        if evidence.suspect:
            return minute, evidence.reason
    return None, ""


def test_a_scan_asks_three_minutes_of_passing_whatever_the_period() -> None:
    # A node passing the 20-minute scan (short of its at-once level) from minute 70 on: at a 1-minute period its
    # third look lists it (3 minutes of passes); at a 5- or 10-minute period one look covers 3 minutes, so its
    # first does, not its third (10 or 20 minutes later, as when the persistence was counted in looks).
    assert policy_listed_at(1, {20: SCAN_PASS}, 70, 120)[0] == 72
    assert policy_listed_at(2, {20: SCAN_PASS}, 70, 120)[0] == 72
    assert policy_listed_at(5, {20: SCAN_PASS}, 70, 120)[0] == 70
    assert policy_listed_at(10, {20: SCAN_PASS}, 70, 120)[0] == 70


def test_the_window_asks_fifteen_minutes_of_passing_whatever_the_period() -> None:
    # The window looks every 5 minutes: 3 looks at a 1- or 5-minute period; at a 10-minute period 2 looks (20
    # minutes) cover 15, not 3 (30 minutes).
    assert policy_listed_at(1, {60: LUCKY}, 70, 150)[0] == 80
    assert policy_listed_at(5, {60: LUCKY}, 70, 150)[0] == 80
    minute, reason = policy_listed_at(10, {60: LUCKY}, 70, 150)
    assert minute == 80
    assert "2 consecutive looks passed" in reason


def test_a_scan_lists_at_once_only_beyond_its_level_against_the_spread() -> None:
    # z 4.38 against the spread passes the scan's plain level (4.75) but not its at-once level (4.5): not listed
    # at its first look; z 4.67 is.
    assert policy_listed_at(1, {20: SCAN_PASS}, 70, 71)[0] is None
    minute, reason = policy_listed_at(1, {20: SCAN_BEYOND}, 70, 71)
    assert minute == 70 and "at once" in reason and "z 4.7 >= 4.5" in reason


def test_a_node_short_of_its_looks_is_described_so() -> None:
    det = policy_detector(1)
    evidence = det._judge("n1", policy_tallies(det, {20: SCAN_PASS}), 70 * MIN, lambda: TAU2)
    assert not evidence.suspect
    assert evidence.reason == ("passed 1 of 3 looks over 20 min; listed after 3 in a row (3 min of event time) or "
                               "at once at z 4.5 against the spread")


def test_a_failing_look_starts_the_count_again() -> None:
    # Pass, pass, fail, pass: no three in a row at minute 20; three more passes from 20 list at 30.
    looks = {5: LUCKY, 10: LUCKY, 15: QUIET, 20: LUCKY, 25: LUCKY, 30: LUCKY}
    assert listed_at(window_detector(), looks, 30)[0] == 30


def test_a_boundary_judged_twice_counts_once() -> None:
    # A boundary judged again (a rebalanced worker re-judging it) is still one look: listed at the third boundary.
    det = window_detector()
    for minute in (5, 5, 10, 10):
        assert not det._judge("n1", [LUCKY], minute * MIN, lambda: TAU2).suspect
    assert det._judge("n1", [LUCKY], 15 * MIN, lambda: TAU2).suspect


def test_a_released_node_counts_its_looks_afresh() -> None:
    # Listed by the window's three looks, released at 25 by the 10-minute scale (its recent tasks back to normal)
    # while the window, still holding the slow tasks, passes: it needs three more passing looks, not one.
    det = RunningTaskDetector((Scale(10 * MIN, z=50.0), Scale(60 * MIN, every_us=5 * MIN, repeat_us=15 * MIN,
                                                                at_once=4.3)), z_list=4.6, period_us=MIN)
    det.observe(TaskStart("j", "t", 0, "n1", 0))
    judged = {m: det._judge("n1", [QUIET, LUCKY], m * MIN, lambda: TAU2) for m in (5, 10, 15, 20)}
    assert [m for m, e in judged.items() if e.suspect] == [15, 20]
    released = det._judge("n1", [RECOVERED, LUCKY], 25 * MIN, lambda: TAU2)
    assert not released.suspect and released.reason.startswith("recovered")
    again = {m: det._judge("n1", [QUIET, LUCKY], m * MIN, lambda: TAU2).suspect for m in (30, 35, 40)}
    assert again == {30: False, 35: False, 40: True}


def test_a_node_that_left_counts_its_looks_afresh_when_it_returns() -> None:
    # Two passing looks, then the node runs nothing for an hour (forgotten): back at minute 75 it needs three.
    det = RunningTaskDetector((Scale(60 * MIN, every_us=5 * MIN, repeat_us=15 * MIN, at_once=4.3),), z_list=4.6,
                              period_us=MIN)
    det.observe(TaskStart("j", "t", 0, "n1", 0))
    det.observe(TaskFinish("j", "t", 0, "n1", MIN, MIN, Status.SUCCEEDED))
    for minute in (5, 10):
        assert not det._judge("n1", [LUCKY], minute * MIN, lambda: TAU2).suspect
    det.detect(WindowView(0, 70 * MIN, {}))  # no task started for 60 minutes, none running: n1 is forgotten
    back = {m: det._judge("n1", [LUCKY], m * MIN, lambda: TAU2).suspect for m in (75, 80, 85)}
    assert back == {75: False, 80: False, 85: True}


def test_looks_count_in_the_warm_up_but_list_only_after_it() -> None:
    det = RunningTaskDetector((Scale(60 * MIN, every_us=5 * MIN, repeat_us=15 * MIN, at_once=4.3),), z_list=4.6,
                              period_us=MIN, warmup_us=20 * MIN)
    det.observe(TaskStart("j", "t", 0, "n1", 0))
    judged = {m: det._judge("n1", [LUCKY], m * MIN, lambda: TAU2) for m in (5, 10, 15, 20)}
    assert [m for m, e in judged.items() if e.suspect] == [20]  # its fourth passing look, the first after warm-up
    assert "warm-up" in judged[15].reason
    assert "4 consecutive looks passed" in judged[20].reason


def test_a_restart_with_another_window_counts_that_scale_afresh() -> None:
    def scales(window_min: int) -> tuple[Scale, ...]:
        return (Scale(10 * MIN, z=50.0), Scale(window_min * MIN, every_us=5 * MIN, repeat_us=15 * MIN, at_once=4.3))

    det = RunningTaskDetector(scales(60), z_list=4.6, period_us=MIN)
    det.observe(TaskStart("j", "t", 0, "n1", 0))
    for minute in (5, 10):
        assert not det._judge("n1", [QUIET, LUCKY], minute * MIN, lambda: TAU2).suspect
    state = json.loads(json.dumps(det.snapshot()))
    same, other = (RunningTaskDetector(scales(w), z_list=4.6, period_us=MIN) for w in (60, 90))
    for restarted in (same, other):
        restarted.restore(state)
    # Same scales: the third look lists. A 90-minute window (as many scales): its looks so far were over another
    # window, so it needs three of its own; so does a snapshot from before scales were recorded with the counters.
    assert same._judge("n1", [QUIET, LUCKY], 15 * MIN, lambda: TAU2).suspect
    assert not other._judge("n1", [QUIET, LUCKY], 15 * MIN, lambda: TAU2).suspect
    old = RunningTaskDetector(scales(60), z_list=4.6, period_us=MIN)
    old.restore({k: v for k, v in state.items() if k != "look_scales"})
    assert not old._judge("n1", [QUIET, LUCKY], 15 * MIN, lambda: TAU2).suspect


# Written by the detector of main at 33a0ca3 (before the looks moved to looks.py) after two passing looks of the
# window at minutes 5 and 10: a worker restarted on a newer version must read it as it was meant.
SNAPSHOT_BEFORE_LOOKS_MODULE = json.loads(
    '{"version": 2, "buffer": [[0, 0, 1, "j", "t", "n1", -1]], "seq": 1, "tasks": [], "since": {}, '
    '"streak": {"n1": [0, 600000000]}, "looks": {"n1": [[0, 2], 600000000]}, '
    '"look_scales": [[600000000, 50.0, null, false, 0.3, 5], [3600000000, 4.6, 300000000, false, 0.3, 5]], '
    '"effect": {}, "found": {}, "first": 0, "projected": [], "reported": []}')


def test_a_snapshot_written_before_the_looks_module_restores_its_looks_and_is_written_back_the_same() -> None:
    scales = (Scale(10 * MIN, z=50.0), Scale(60 * MIN, every_us=5 * MIN, repeat_us=15 * MIN, at_once=4.3))
    det = RunningTaskDetector(scales, z_list=4.6, period_us=MIN)
    det.restore(SNAPSHOT_BEFORE_LOOKS_MODULE)
    assert det.snapshot() == SNAPSHOT_BEFORE_LOOKS_MODULE  # the format (keys, encodings) is unchanged
    evidence = det._judge("n1", [LUCKY, LUCKY], 15 * MIN, lambda: TAU2)
    assert evidence.suspect and "3 consecutive looks passed" in evidence.reason  # the two looks carried over


def heterogeneous_day(seed: int) -> list[Event]:
    """20 nodes, one task a minute each in jobs of 20 (one per node), n10-n19 a healthy 1.3x slower generation;
    n07 turns 2x slow at minute 90."""
    rng, events = random.Random(seed), []
    for minute in range(150):
        size = rng.lognormvariate(0, 0.5) * 3 * MIN
        for i in range(20):
            node, start = f"n{i:02d}", minute * MIN + i
            slow = (2.0 if node == "n07" and minute >= 90 else 1.0) * (1.3 if i >= 10 else 1.0)
            duration = round(size * rng.lognormvariate(0, 0.5) * slow)
            events += [TaskStart(f"j{minute}", str(i), 0, node, start),
                       TaskFinish(f"j{minute}", str(i), 0, node, start + duration, duration, Status.SUCCEEDED)]
    return sorted(events, key=lambda e: e.ts_us)


def run_policy(events: list[Event], period_min: int) -> dict[int, dict[str, Evidence]]:
    """The shipped detector (``registry.running_detector``) fed ``events`` and asked at every boundary."""
    from streams.core.detection.registry import running_detector
    from streams.core.ranking_config import RankingConfig

    det, i, out = running_detector(RankingConfig(period_us=period_min * MIN)), 0, {}
    for end in range(period_min, 151, period_min):
        while i < len(events) and events[i].ts_us < end * MIN:
            observe_task(det, events[i])
            i += 1
        out[end] = dict(det.detect(WindowView(end * MIN - 60 * MIN, end * MIN, {})))
    return out


def test_end_to_end_a_slow_node_on_heterogeneous_hardware_keeps_passing_for_three_minutes() -> None:
    events = heterogeneous_day(1)
    minutely = run_policy(events, 1)
    assert not any(e.suspect for found in minutely.values() for n, e in found.items() if n != "n07")
    listed = min(m for m, found in minutely.items() if "n07" in found and found["n07"].suspect)
    # its two looks before the listing passed the 20-minute scan short of the at-once level; the third listed it
    assert minutely[listed - 2]["n07"].reason.startswith("passed 1 of 3 looks over 20 min")
    assert minutely[listed - 1]["n07"].reason.startswith("passed 2 of 3 looks over 20 min")
    assert "3 consecutive looks passed" in minutely[listed]["n07"].reason
    # At a 5-minute period one passing look of a scan covers its 3 minutes: the scan lists n07 at its first.
    five = run_policy(events, 5)
    assert not any(e.suspect for found in five.values() for n, e in found.items() if n != "n07")
    first = min(m for m, found in five.items() if "n07" in found and found["n07"].suspect)
    reason = five[first]["n07"].reason
    assert reason.startswith("clearly slow over 20 min") and "looks passed" not in reason and "at once" not in reason
    # the words an operator reads in the delta: the tasks' counts in one balanced parenthesis
    assert re.search(r"its \d+ tasks \(\d+ still running, \d+ of them already past their job's median\) run", reason)
    assert reason.count("(") == reason.count(")"), reason
