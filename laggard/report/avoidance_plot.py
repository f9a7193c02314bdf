"""The PNG of ``laggard advise eval --plot``: per run, stragglers avoided and placements refused, and the job
time cut beside the null baseline's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

DPI = 110


def plot_advice(document: dict[str, Any], path: Path) -> None:
    runs = document["runs"]
    names = [r["run"] for r in runs]
    xs = range(len(runs))
    figure = Figure(figsize=(max(6.0, 1.2 * len(runs) + 3), 4.2), dpi=DPI, layout="constrained")
    left, right = figure.subplots(1, 2)
    width = 0.38
    left.bar([x - width / 2 for x in xs], [100 * r["avoided_share"] for r in runs], width, label="stragglers avoided")
    left.bar([x + width / 2 for x in xs], [100 * r["refused_share"] for r in runs], width, label="placements refused")
    left.axhline(50, color="#555555", linestyle=":", linewidth=1)
    left.axhline(10, color="#555555", linestyle=":", linewidth=1)
    left.set_ylabel("%")
    left.set_title(rule_title(document))
    right.bar([x - width / 2 for x in xs], [100 * (r["jct_reduction"] or 0) for r in runs], width, label="adviser")
    right.bar([x + width / 2 for x in xs], [100 * (r["null_jct_reduction"] or 0) for r in runs], width,
              label="as many random refusals")  # fmt: skip
    right.set_ylabel("mean job time cut, % (touched jobs)")
    right.set_title("refused tasks re-placed")
    for axes in (left, right):
        axes.set_xticks(list(xs), names, rotation=30, ha="right")
        axes.legend(fontsize=8)
    figure.savefig(path)


def rule_title(document: dict[str, Any]) -> str:
    """The refusal rule in a few words: the thresholds, or the calibration (which has no fixed threshold)."""
    budget = document.get("refusal_budget") or {}
    if budget.get("mode") == "calibrated":  # the top share of recent requests, paid by tokens
        return (f"adviser, calibrated: refuse the top {100 * budget['least']:.0f}-{100 * budget['top']:.0f} % "
                f"of the last {budget['window']:,} requests")
    limit = document["threshold"]
    words = ", ".join(f"{k} {v:+.2f}" for k, v in sorted(limit.items())) if isinstance(limit, dict) else f"{limit:+.2f}"
    return f"adviser, avoid above {document.get('target', 'z')} {words}"
