"""scripts/prediction_default.py's choice rule: a lead over Spark q0.75 that the tuning jobs disagree on does not
move the choice; the same lead held on every job does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from streams.core.evaluation.selection import Cell

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "prediction_default.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prediction_default", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table(base: list[float], **others: list[float]) -> dict[str, dict[str, Cell]]:
    rows = {"spark-q0.75-m1.5": base, **others}
    return {label: {f"g/{i}": Cell(v, {}, v, 0.0) for i, v in enumerate(f1s)} for label, f1s in rows.items()}


def test_a_lead_the_jobs_disagree_on_keeps_the_baseline_like_choice() -> None:
    pd = _script()
    # like Google's jobs: q0.9 first trails on two jobs and leads a lot on one (mean lead +0.013)
    table = _table([0.05, 0.57, 0.62], same=[0.05, 0.57, 0.62], bold=[0.0, 0.51, 0.77])
    keys = [list(table["same"])]
    assert pd.choose(table, ["bold", "same"], keys) == "same"
    pd.CHOOSE_Z = 0.0  # the bare mean: the old rule follows the noisy lead
    assert pd.choose(table, ["bold", "same"], keys) == "bold"


def test_a_lead_held_on_every_job_is_chosen() -> None:
    pd = _script()
    table = _table([0.30, 0.35, 0.40], same=[0.30, 0.35, 0.40], better=[0.40, 0.46, 0.49])
    assert pd.choose(table, ["same", "better"], [list(table["same"])]) == "better"
