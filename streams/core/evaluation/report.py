"""Rows and summaries of prediction scores, as ``laggard eval`` prints them and writes them as JSON.

>>> from streams.core.evaluation.prediction import Run, Truth, score
>>> truth = Truth({"a": 10.0, "b": 1.0, "c": 2.0}, {"c"}, tau_s=10.0, median_s=2.0)
>>> run = Run([], checkpoints=4, elapsed_ns=8_000)
>>> m = score(truth.durations_s, {}, truth.initial, truth.tau_s, truth.median_s)
>>> row = score_row(MethodScore("j", "toy", False, truth, m, run))
>>> row["method"], row["f1_in_time"], row["f1_at_50"], row["f1"], row["us_per_checkpoint"], row["online"]
('toy', 0.0, 0.0, 0.0, 2.0, None)
>>> summary = summarise([row], ["toy"])["toy"]
>>> summary["jobs"], summary["mean_f1_in_time"]
(1, 0.0)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from streams.core.evaluation.prediction import Metrics
from streams.core.evaluation.runner import MethodScore

PROTOCOL = (
    "oracle threshold: a straggler is a task at or above its job's true p90 latency "
    "(sorted(latencies)[int(0.9 n)]), and tau-based methods flag against that same tau, as in the Nurd paper; "
    "each task counts once, by its first flag; FPR excludes the initial training set"
)
COLUMNS = {
    "f1_in_time": "primary score: a straggler's flag is a true positive only when a copy relaunched at the flag, "
    "taking the job's median duration, would finish before the original (a flag a second before the end is late)",
    "f1_at_25": "a straggler's flag counts only when raised before 25 % of its duration",
    "f1_at_50": "the same before 50 % of its duration",
    "f1_at_75": "the same before 75 % of its duration",
    "f1": "secondary, the Nurd paper's F1: flagged at any checkpoint before the task finished",
    "precision": "flagged tasks that were stragglers (any flag before the finish)",
    "late_flags": "flags raised only on the checkpoint that coincides with the finish (not predictions)",
    "mean_flag_time": "mean elapsed/duration when a true straggler is first flagged",
}
FIELDS = ("f1_in_time", "f1_at_25", "f1_at_50", "f1_at_75", "f1", "precision", "tpr", "fpr", "fnr")
ONLINE = "online threshold: tau = p90 of the job's latency estimates known at the time (no oracle)"


def _metrics_fields(m: Metrics) -> dict[str, Any]:
    at = {f"f1_at_{round(100 * f)}": value for f, value in m.f1_at.items()}
    return {"f1_in_time": m.f1_in_time, **at, "f1": m.f1, "precision": m.precision, "tpr": m.tpr, "fpr": m.fpr,
            "fnr": m.fnr, "in_time": m.in_time}  # fmt: skip


def score_row(s: MethodScore) -> dict[str, Any]:
    """One row of the report: the method on one job, oracle tau, and the online threshold beside it."""
    m, run, truth = s.oracle, s.run, s.truth
    row: dict[str, Any] = {
        "job_id": s.job_id, "method": s.method, "n_tasks": m.n_tasks, "n_stragglers": m.n_stragglers,
        **_metrics_fields(m), "us_per_checkpoint": run.us_per_checkpoint,
        "tau_s": truth.tau_s, "relaunch_s": truth.median_s, "uses_tau": s.uses_tau, "n_initial": m.n_initial,
        "tp": m.tp, "fp": m.fp, "fn": m.fn, "tn": m.tn, "late_flags": m.late, "mean_flag_time": m.flag_time,
        "checkpoints": run.checkpoints, "elapsed_ns": run.elapsed_ns, "online": None,
    }  # fmt: skip
    if s.online is not None and s.online_run is not None:
        o = s.online
        row["online"] = {**_metrics_fields(o), "us_per_checkpoint": s.online_run.us_per_checkpoint,
                         "late_flags": o.late, "mean_flag_time": o.flag_time}  # fmt: skip
    return row


def summarise(rows: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Means over jobs per method; us_per_checkpoint is total time over total checkpoints."""
    summary: dict[str, dict[str, Any]] = {}
    for name in methods:
        mine = [r for r in rows if r["method"] == name]
        if not mine:
            continue
        checkpoints = sum(r["checkpoints"] for r in mine)
        entry: dict[str, Any] = {f"mean_{key}": statistics.fmean(r[key] for r in mine) for key in FIELDS}
        entry["us_per_checkpoint"] = sum(r["elapsed_ns"] for r in mine) / 1e3 / checkpoints if checkpoints else 0.0
        entry["jobs"] = len(mine)
        entry["online"] = None
        online = [r["online"] for r in mine if r["online"] is not None]
        if online:
            keys = ("f1_in_time", "f1_at_25", "f1_at_50", "f1_at_75", "f1", "tpr", "fpr")
            entry["online"] = {key: statistics.fmean(o[key] for o in online) for key in keys}
        summary[name] = entry
    return summary
