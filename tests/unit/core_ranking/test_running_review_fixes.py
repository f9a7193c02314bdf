"""Two review findings on the running detector, pinned: a creeping progress report cannot project a task
decades long (past the sort key's 42 bits of time), and the long scales look about every 5 minutes at any
ranking period (a 2-minute period looked only every 10)."""

from __future__ import annotations

import numpy as np

from streams.core.detection.running import RunningTaskDetector
from streams.core.detection.scales import Scale, looks_at

MINUTE = 60_000_000


def test_a_creeping_report_projects_no_further_than_the_mean_rate_bound() -> None:
    detector = RunningTaskDetector([Scale(15 * MINUTE)], recent_rate=True, min_progress=0.1)
    detector._log._checkpoint(("j", "t"), 10 * MINUTE, 0.5)
    detector._log._checkpoint(("j", "t"), 11 * MINUTE, 0.500001)  # one millionth in a minute
    assert detector._log.projected[("j", "t")] <= 11 * MINUTE / 0.1


def test_long_scales_look_about_every_five_minutes_at_any_period() -> None:
    for period in (1, 2, 3, 7):
        looks = [m for m in range(0, 600, period) if looks_at(m * MINUTE, 5 * MINUTE, period * MINUTE)]
        gaps = np.diff(looks)
        assert gaps.max() <= max(5 + period - 1, period) and abs(gaps.mean() - max(5, period)) < 0.6
