"""Timelines of the fault scenarios: when each node was slow (red) and when it was listed (black), per loop."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

US_PER_H = 3_600_000_000
DPI = 110


def plot_timelines(results: Sequence[Any], directory: Path) -> list[Path]:
    """One PNG per scenario for its first seed, a panel per loop; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    first: dict[str, list[Any]] = {}
    for result in results:
        runs = first.setdefault(result.scenario, [])
        if not runs or runs[0].seed == result.seed:
            runs.append(result)
    written = []
    for name, runs in first.items():
        path = directory / f"{name}.png"
        _timeline(name, runs, path)
        written.append(path)
    return written


def _timeline(name: str, runs: Sequence[Any], path: Path) -> None:
    truth = runs[0].truth
    nodes = sorted(set(truth["slow_spans"]) | {s.node_id for r in runs for s in r.stays})
    end = max([s.end_us or 0 for r in runs for s in r.stays] + [1], default=1)
    figure = Figure(figsize=(10, 1.6 + 0.22 * max(4, len(nodes)) * len(runs)), dpi=DPI, layout="constrained")
    for k, run in enumerate(runs):
        axes = figure.add_subplot(len(runs), 1, k + 1)
        rows = {node: y for y, node in enumerate(nodes)}
        for node, spans in truth["slow_spans"].items():
            for start, stop in spans:
                axes.barh(rows[node], ((stop or end) - start) / US_PER_H, left=start / US_PER_H, height=0.8,
                          color="#d62728", alpha=0.3)
        for stay in run.stays:
            stop = stay.end_us if stay.end_us is not None else end
            color = "black" if stay.node_id in truth["slow_spans"] else "#ff7f0e"
            axes.barh(rows[stay.node_id], (stop - stay.start_us) / US_PER_H, left=stay.start_us / US_PER_H,
                      height=0.35, color=color)
        axes.set_yticks(range(len(nodes)), nodes, fontsize=7)
        axes.set_title(f"{name}, seed {run.seed}, {run.loop} loop", fontsize=9)
        axes.set_xlabel("event time (h)")
    figure.legend(handles=[Patch(color="#d62728", alpha=0.3, label="fault active"),
                           Patch(color="black", label="listed (faulty)"),
                           Patch(color="#ff7f0e", label="listed (healthy)")], loc="outside lower center", ncols=3)
    figure.savefig(path)
