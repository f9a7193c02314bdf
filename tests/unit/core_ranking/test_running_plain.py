"""The running detector judges the nodes no scale could pass over columns (``streams.core.detection.columns``): what
it says of every node at every boundary, and the state it keeps, must be what judging each node in full says."""

from __future__ import annotations

import pytest

from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.core.detection.base import WindowView, observe_task
from streams.core.detection.registry import running_detector
from streams.core.detection.running import RunningTaskDetector
from streams.core.ranking_config import RankingConfig

MIN = 60_000_000


def judged(name: str, seed: int, period_min: int, plain: bool) -> tuple[list[dict], dict, int]:
    """Every boundary's evidence (suspect, score, words) and the final snapshot of the shipped detector over a
    small copy of scenario ``name``; with ``plain`` False, every node goes through ``_judge``. Also how many
    node judgements took the column path."""
    det: RunningTaskDetector = running_detector(RankingConfig(policy="running", period_us=period_min * MIN))
    taken = 0
    if not plain:
        det._plain = lambda judged, cols: None  # type: ignore[method-assign]
    else:
        inner = det._plain

        def counting(judged, cols):  # type: ignore[no-untyped-def]
            nonlocal taken
            out = inner(judged, cols)
            taken += 0 if out is None else sum(w is not None for w in out)
            return out

        det._plain = counting  # type: ignore[method-assign]
    scenario = SCENARIOS[name].scaled(nodes=40, hours=3.5)
    boundaries, next_end = [], period_min * MIN
    for event in ClusterSim(scenario, seed=seed):
        while event.ts_us >= next_end:
            evidence = det.detect(WindowView(0, next_end, {}))
            boundaries.append({n: (e.suspect, e.score, e.reason) for n, e in evidence.items()})
            next_end += period_min * MIN
        observe_task(det, event)
    return boundaries, det.snapshot(), taken


@pytest.mark.parametrize(("name", "seed", "period_min"), [("cpu-2x", 3, 5), ("intermittent-2x", 4, 1),
                                                          ("hetero-wide-2x", 5, 5)])
def test_the_column_path_says_and_keeps_what_judging_every_node_does(name: str, seed: int, period_min: int) -> None:
    fast, fast_state, taken = judged(name, seed, period_min, plain=True)
    full, full_state, _ = judged(name, seed, period_min, plain=False)
    assert fast == full
    assert fast_state == full_state
    assert any(e[0] for b in fast for e in b.values()), "a slow node was listed: the full path ran too"
    assert taken > 0.8 * sum(len(b) for b in fast), "most judgements took the column path"
