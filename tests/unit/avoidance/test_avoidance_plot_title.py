"""The plot of ``advise eval --plot`` names the rule that refused: a calibrated run has no fixed threshold, and
its title must not read as one ("avoid above p +0.00" was the calibration's floor)."""

from __future__ import annotations

from pathlib import Path

from laggard.report.avoidance_plot import plot_advice, rule_title

RUN = {"run": "seed 1", "avoided_share": 0.55, "refused_share": 0.08, "jct_reduction": 0.2, "null_jct_reduction": 0.03}


def test_calibrated_run_is_titled_by_its_share_of_recent_requests(tmp_path: Path) -> None:
    document = {"threshold": 0.0, "target": "p", "runs": [RUN],
                "refusal_budget": {"mode": "calibrated", "top": 0.15, "least": 0.06, "window": 10_000}}
    assert rule_title(document) == "adviser, calibrated: refuse the top 6-15 % of the last 10,000 requests"
    plot_advice(document, tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_threshold_run_is_titled_by_its_thresholds() -> None:
    document = {"threshold": {"0": 0.3, "1": 0.41}, "target": "p", "runs": [RUN], "refusal_budget": None}
    assert rule_title(document) == "adviser, avoid above p 0 +0.30, 1 +0.41"
