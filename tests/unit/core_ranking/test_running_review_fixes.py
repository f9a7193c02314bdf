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


def test_nodes_gone_quiet_together_are_forgotten_in_name_order_whatever_the_hash_seed() -> None:
    """Their evidence and their keys in the checkpoint's ``since`` came in a set's order, which changed with
    PYTHONHASHSEED: two runs of one trace could write different checkpoints (session 27's review)."""
    import os
    import subprocess
    import sys

    script = (
        "import json\n"
        "from streams.core.detection.base import WindowView\n"
        "from streams.core.detection.running import RunningTaskDetector\n"
        "from streams.core.detection.scales import Scale\n"
        "MIN = 60_000_000\n"
        "d = RunningTaskDetector([Scale(15 * MIN)], quiet_us=10 * MIN)\n"
        "s = d.snapshot()\n"
        "names = ['node-b', 'node-a', 'node-d', 'node-c']\n"
        "s.update(effect={n: 1.0 for n in names}, found={n: 0 for n in names}, streak={n: [1, 0] for n in names})\n"
        "d.restore(json.loads(json.dumps(s)))\n"
        "print(list(d.detect(WindowView(0, 60 * MIN, {}))), list(d.snapshot()['since']))\n"
    )
    outputs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
               for seed in range(4)}
    expected = ["node-a", "node-b", "node-c", "node-d"]
    assert outputs == {f"{expected} {expected}\n"}
