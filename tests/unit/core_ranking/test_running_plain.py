"""The running detector judges the nodes no scale could pass over columns (``streams.core.detection.columns``): what
it says of every node at every boundary, and the state it keeps, must be what judging each node in full says."""

from __future__ import annotations

import numpy as np
import pytest

from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.core.detection.base import WindowView, observe_task
from streams.core.detection.registry import running_detector
from streams.core.detection.running import RunningTaskDetector
from streams.core.ranking_config import RankingConfig

MIN = 60_000_000


def judged(name: str, seed: int, period_min: int, plain: bool, hours: float = 3.5
           ) -> tuple[list[dict], dict, int, int]:
    """Every boundary's evidence (suspect, score, words) and the final snapshot of the shipped detector over a
    small copy of scenario ``name``; with ``plain`` False, every node goes through ``_judge``. Also how many
    node judgements took the column path, and how many of those gave last period's Evidence again (its cache)."""
    det: RunningTaskDetector = running_detector(RankingConfig(policy="running", period_us=period_min * MIN))
    taken = reused = 0
    if not plain:
        det._plain = lambda kept, cols: (np.zeros(len(kept), dtype=bool), np.zeros((len(kept), 4)))  # type: ignore
    else:
        inner, again = det._plain, det._reusable

        def counting(kept, cols):  # type: ignore[no-untyped-def]
            nonlocal taken
            out = inner(kept, cols)
            taken += sum(out[0])
            return out

        def reusing(*args):  # type: ignore[no-untyped-def]
            nonlocal reused
            out = again(*args)
            reused += sum(out[0])
            return out

        det._plain, det._reusable = counting, reusing  # type: ignore[method-assign]
    scenario = SCENARIOS[name].scaled(nodes=40, hours=hours)
    boundaries, next_end = [], period_min * MIN
    for event in ClusterSim(scenario, seed=seed):
        while event.ts_us >= next_end:
            evidence = det.detect(WindowView(0, next_end, {}))
            boundaries.append({n: (e.node_id, e.suspect, e.score, e.reason) for n, e in evidence.items()})
            next_end += period_min * MIN
        observe_task(det, event)
    return boundaries, det.snapshot(), taken, reused


@pytest.mark.parametrize(("name", "seed", "period_min", "hours", "lists"), [
    ("cpu-2x", 3, 5, 3.5, True), ("intermittent-2x", 4, 1, 3.5, True), ("hetero-wide-2x", 5, 5, 3.5, True),
    ("gradual-3x", 6, 5, 7.0, True),  # past the detector's memory (4 h): its task table is compacted and renumbered
    ("sparse-4x", 2, 5, 4.0, False),  # few tasks a node (none listed here): many keep last period's Evidence
])
def test_the_column_path_says_and_keeps_what_judging_every_node_does(name: str, seed: int, period_min: int,
                                                                     hours: float, lists: bool) -> None:
    fast, fast_state, taken, reused = judged(name, seed, period_min, plain=True, hours=hours)
    full, full_state, _, _ = judged(name, seed, period_min, plain=False, hours=hours)
    assert fast == full
    assert fast_state == full_state
    assert not lists or any(e[1] for b in fast for e in b.values()), "a slow node was listed: the full path ran"
    assert taken > 0.8 * sum(len(b) for b in fast), "most judgements took the column path"
    assert 0 < reused < taken, "some plain nodes gave last period's Evidence again, not all"


def test_the_evidence_cache_is_dropped_when_the_task_table_renumbers_its_nodes() -> None:
    """A compaction gives the task table a new list of node names, and codes may then name other nodes: last period's
    Evidence, kept by code, must not be given again. Renumbering to the same order here, so only the guard (not the
    numbers) can tell."""
    det: RunningTaskDetector = running_detector(RankingConfig(policy="running", period_us=5 * MIN))
    reused: list[int] = []
    again = det._reusable

    def reusing(*args):  # type: ignore[no-untyped-def]
        out = again(*args)
        reused.append(sum(out[0]))
        return out

    det._reusable = reusing  # type: ignore[method-assign]
    scenario = SCENARIOS["sparse-4x"].scaled(nodes=40, hours=4.0)  # few tasks a node: numbers often stay equal
    next_end, renumbered = 5 * MIN, 0
    for event in ClusterSim(scenario, seed=2):
        while event.ts_us >= next_end:
            renumber = bool(reused) and reused[-1] > 0  # the last look gave some Evidence again: would this one?
            if renumber:
                det._log.table.node_names = list(det._log.table.node_names)  # a new list, the same codes
            det.detect(WindowView(0, next_end, {}))
            if renumber:
                assert reused[-1] == 0
                renumbered += 1
            next_end += 5 * MIN
        observe_task(det, event)
    assert renumbered > 0
