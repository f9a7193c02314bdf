"""The bench's arithmetic on figures a loaded machine can produce (no broker: pure functions)."""

from __future__ import annotations

from laggard.bench.kafka import counted
from laggard.bench.output import _over, _target


def test_progress_marks_that_count_nothing_yet_do_not_start_the_measuring_window() -> None:
    # CI once ended a tiny run on a worker's start-up marks alone (watermarks before every pre-loaded event),
    # measured a rate of 0 and crashed dividing by it
    marks = [(1_000, 0), (9_000, 0), (12_000, 400), (15_000, 900)]
    assert counted(marks) == [(12_000, 400), (15_000, 900)]
    assert counted([(1_000, 0), (9_000, 0)]) == []


def test_a_rate_of_zero_leaves_its_ratio_empty_and_its_target_unmet_instead_of_crashing_the_bench() -> None:
    assert _over(3.0, 4.0) == 0.75
    assert _over(3.0, 0.0) is None
    assert _target("two workers / one worker", None, 1.5, "times")["met"] is False
    assert _target("two workers / one worker", 1.6, 1.5, "times")["met"] is True
