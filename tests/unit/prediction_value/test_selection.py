"""Held-out selection: a configuration is never scored on the jobs it was chosen on."""

from __future__ import annotations

from collections import defaultdict

import pytest

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.evaluation.selection import (
    ANY,
    CANDIDATES,
    Candidate,
    Cell,
    leave_one_out,
    score_candidates,
    summarise,
)
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext


def _table(values: dict[str, dict[str, float]]) -> dict[str, dict[str, Cell]]:
    return {label: {job: Cell(v, {0.5: v}, v, v / 10) for job, v in jobs.items()} for label, jobs in values.items()}


def test_each_held_out_job_is_scored_with_the_choice_of_the_others() -> None:
    # "lucky" is best on one job only; chosen on the other two it would not win, so held out it is never used there
    table = _table({"steady": {"a": 0.5, "b": 0.5, "c": 0.5}, "lucky": {"a": 1.0, "b": 0.0, "c": 0.0}})
    rows = leave_one_out(table, {"steady": "f", "lucky": "f"}, {"a": "a", "b": "b", "c": "c"})
    held = {r.group: (r.chosen, r.f1_in_time) for r in rows if r.family == "f"}
    assert held == {"a": ("steady", 0.5), "b": ("steady", 0.5), "c": ("steady", 0.5)}
    # in-sample, "lucky" would have been reported at 1.0 on job a; held out, the family scores 0.5
    assert summarise(rows)["f"]["f1_in_time"] == pytest.approx(0.5)


def test_groups_hold_out_whole_traces_and_yardsticks_are_never_chosen() -> None:
    table = _table({"rule": {"s1/j": 0.3, "s2/j": 0.3}, "oracle": {"s1/j": 0.9, "s2/j": 0.9}})
    rows = leave_one_out(table, {"rule": "rule", "oracle": "oracle"}, {"s1/j": "s1", "s2/j": "s2"},
                         yardsticks=frozenset({"oracle"}))  # fmt: skip
    assert {r.chosen for r in rows if r.family == ANY} == {"rule"}
    assert {r.group for r in rows} == {"s1", "s2"}


def test_the_candidates_cover_the_issue_grid() -> None:
    families = {c.family for c in CANDIDATES}
    assert {"supervised", "supervised-node", "nurd", "hazard", "hazard-no-node", "hazard-local", "select",
            "spark-q0.75-m1.5", "spark-node"} <= families
    windows = {c.params.get("h_window") for c in CANDIDATES if c.family == "supervised"}
    assert windows == {20, 50, 200} and len({c.label for c in CANDIDATES}) == len(CANDIDATES)


def test_candidates_run_on_a_generated_cluster_with_in_time_f1_and_the_jct_change() -> None:
    jobs: dict[str, list[Event]] = defaultdict(list)
    for event in SyntheticCluster(SyntheticConfig(nodes=12, slow=2, jobs=6, tasks=(20, 20), checkpoints=4, seed=7)):
        jobs[event.job_id].append(event)
    candidates = [Candidate("spark", "spark-q0.75-m1.5"), Candidate("hazard", "hazard", {"hazard_p": 0.3})]
    table = score_candidates({"syn": dict(jobs)}, candidates, PredictionContext(), repeats=1)
    assert set(table) == {"spark-q0.75-m1.5", "hazard[hazard_p=0.3]"}
    for cells in table.values():
        assert len(cells) == 6 and all(key.startswith("syn/") for key in cells)
        for cell in cells.values():  # a flag in time is a flag before the end: never more in-time F1 than F1
            assert 0 <= cell.f1_in_time <= cell.f1 <= 1 and cell.f1_at[0.25] <= cell.f1_at[0.75] <= cell.f1
            assert cell.jct_change < 1
