"""``laggard classify --plot``: the clusters of the last period and the accuracy per period (paper Figs. 4, 6).

The clusters are drawn on the two features that sum a whole period up: each node's mean z and std z over the
full period (the last sub-period's cumulative values), coloured by cluster, the weak cluster in red.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from laggard.errors import UserError

DPI = 110
WEAK_COLOR = "#d62728"
COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff7f0e")


def write_plots(runs: list[Any], directory: str) -> list[str]:
    """clusters-N.png and accuracy-N.png for each trace N (from 1); returns the paths written."""
    folder = Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the plot directory {folder}: {exc.strerror or exc}") from exc
    written = []
    for number, run in enumerate(runs, start=1):
        clusters, accuracy = folder / f"clusters-{number}.png", folder / f"accuracy-{number}.png"
        if plot_clusters(run, clusters):
            written.append(str(clusters))
        plot_accuracy(run, accuracy)
        written.append(str(accuracy))
    return written


def plot_clusters(run: Any, path: Path) -> bool:
    """The last clustered period's nodes on (mean z, std z); False when no period could be clustered."""
    periods = [p for p in run.analysis.periods if p.outcome.choice is not None]
    if not periods:
        return False
    period = periods[-1]
    table, choice = period.outcome.table, period.outcome.choice
    last = 3 * (table.sub_periods - 1)
    figure = Figure(figsize=(7, 5), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    for cluster in range(choice.k):
        rows = [table.values[i] for i in range(len(table.nodes)) if choice.chosen.labels[i] == cluster]
        weak = cluster == choice.weak
        axes.scatter([r[last] for r in rows], [r[last + 1] for r in rows], s=14 if not weak else 24,
                     color=WEAK_COLOR if weak else COLORS[cluster % len(COLORS)],
                     label=f"cluster {cluster + 1} ({len(rows)}){' weak' if weak else ''}")  # fmt: skip
    axes.axvline(0.0, color="black", linewidth=0.6, linestyle=":")
    axes.set_xlabel("mean z over the period")
    axes.set_ylabel("std z over the period")
    axes.set_title(f"{run.spec}\nperiod {period.outcome.index}: k = {choice.k}, CH = {choice.chosen.score:.1f}",
                   fontsize=9)
    axes.legend(fontsize=8)
    figure.savefig(path)
    return True


def plot_accuracy(run: Any, path: Path) -> None:
    """Accuracy of each method's next-period prediction per period, against the truth when known."""
    analysis = run.analysis
    against_truth = any(p.truth for p in analysis.periods)
    figure = Figure(figsize=(8, 4.5), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    for number, method in enumerate(analysis.methods):
        points = [(p.outcome.index, (p.truth if against_truth else p.labels)[method].accuracy)
                  for p in analysis.periods if method in (p.truth if against_truth else p.labels)]  # fmt: skip
        xs = [x for x, y in points if y is not None]
        ys = [y for _, y in points if y is not None]
        axes.plot(xs, ys, marker="o", markersize=3, color=COLORS[number % len(COLORS)], label=method)
    axes.set_xlabel("period predicted")
    axes.set_ylabel("accuracy vs " + ("the truth" if against_truth else "the automatic labels"))
    axes.set_title(run.spec, fontsize=9)
    axes.legend(fontsize=8)
    figure.savefig(path)
