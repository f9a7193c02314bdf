"""The demo's PNG plots, drawn with matplotlib's object API on the Agg canvas (no display, no pyplot state).

Each function takes what a run produced and a path, and writes one PNG:
``plot_intervals`` (every node's 95 % interval at the end, by P-Cores level), ``plot_blacklist_timeline``
(which nodes were listed when, against the fault) and ``plot_ci_low`` (the lower interval end of every
node over time against the significance floor: the quantity the blacklist decision turns on).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from laggard.report.history import RunHistory
from streams.core.evaluation.detection import Span
from streams.core.ranking import Ranking

US_PER_H = 3_600_000_000
LEVEL_COLORS = ("#222222", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
SLOW_COLOR = "#d62728"
HEALTHY_COLOR = "#9e9e9e"
FALSE_POSITIVE_COLOR = "#ff7f0e"
MAX_LABELLED_NODES = 90  # beyond this, only blacklisted and slow nodes keep a tick label
DPI = 110


def _hours(us: float) -> float:
    return us / US_PER_H


def _floor_label(floor: float, used: bool) -> str:
    """The significance floor's legend entry; a policy that does not read it (``Policy.reads_floor``) says so."""
    return f"significance floor {floor:g}" + ("" if used else " (not used by this policy)")


def plot_intervals(ranking: Ranking, slow: Collection[str], floor: float | None, path: Path,
                   floor_used: bool = True) -> None:
    """Each node's mean z and 95 % interval in the final window, coloured by level, slowest at the top."""
    rows = sorted(ranking.ranked, key=lambda row: (row.stats.mean if row.stats else 0.0, row.node_id))
    figure = Figure(figsize=(9, max(4.0, 0.16 * len(rows) + 1.8)), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    levels_seen: set[int] = set()
    for y, row in enumerate(rows):
        stats = row.stats
        assert stats is not None
        level = -1 if row.level is None else row.level
        levels_seen.add(level)
        color = LEVEL_COLORS[level % len(LEVEL_COLORS)] if level >= 0 else "black"
        if stats.ci_low is not None and stats.ci_high is not None:
            axes.hlines(y, stats.ci_low, stats.ci_high, color=color, linewidth=2.2)
        axes.plot(stats.mean, y, "o", color=color, markersize=4)
        if row.blacklisted:
            axes.plot(
                stats.mean, y, "s", markersize=10, markerfacecolor="none", markeredgecolor="black", markeredgewidth=1.5
            )
    _node_ticks(axes, [row.node_id for row in rows], [row.blacklisted for row in rows], slow)
    axes.axvline(0.0, color="black", linewidth=0.6, linestyle=":")
    handles: list[Artist] = [
        Line2D(
            [],
            [],
            color=LEVEL_COLORS[lv % len(LEVEL_COLORS)],
            linewidth=2.2,
            marker="o",
            markersize=4,
            label=f"level {lv}" + (" (nothing clearly slower)" if lv == 0 else ""),
        )
        for lv in sorted(levels_seen)
        if lv >= 0
    ]
    handles.append(
        Line2D(
            [],
            [],
            linestyle="none",
            marker="s",
            markersize=10,
            markerfacecolor="none",
            markeredgecolor="black",
            label="blacklisted",
        )
    )
    handles.append(Patch(facecolor="#fde0dd", edgecolor=SLOW_COLOR, label="injected slow node (label in red)"))
    if floor is not None:
        axes.axvline(floor, color="black", linewidth=1.0, linestyle="--")
        handles.append(Line2D([], [], color="black", linestyle="--", label=_floor_label(floor, floor_used)))
    axes.legend(handles=handles, loc="lower right", fontsize=8, framealpha=0.9)
    axes.set_xlabel("z: task duration in job standard deviations from its job's mean (95 % interval)")
    axes.set_ylabel("node (slowest mean at the top)")
    axes.set_title(
        f"Node intervals in the final window {_hours(ranking.window_start_us):.2f} h to "
        f"{_hours(ranking.window_end_us):.2f} h" + (", P-Cores levels" if levels_seen - {-1} else "")
    )
    axes.grid(axis="x", alpha=0.3)
    figure.savefig(path)


def _node_ticks(axes: Axes, names: list[str], listed: list[bool], slow: Collection[str]) -> None:
    """Tick labels for node rows: red for injected slow nodes, bold for blacklisted ones."""
    show_all = len(names) <= MAX_LABELLED_NODES
    positions = [y for y, name in enumerate(names) if show_all or name in slow or listed[y]]
    axes.set_yticks(positions, [names[y] for y in positions], fontsize=7 if len(names) > 30 else 9)
    axes.set_ylim(-0.7, len(names) - 0.3)
    for label, y in zip(axes.get_yticklabels(), positions, strict=True):
        if names[y] in slow:
            label.set_color(SLOW_COLOR)
            label.set_backgroundcolor("#fde0dd")
        if listed[y]:
            label.set_fontweight("bold")


def plot_blacklist_timeline(spans: list[Span], slow: Collection[str], onset_us: int, end_us: int, path: Path) -> None:
    """One row per node that was slow or listed: the fault period shaded, each stay on the blacklist a bar."""
    names = sorted({span.node_id for span in spans} | set(slow), reverse=True)
    figure = Figure(figsize=(9, max(3.0, 0.42 * len(names) + 2.2)), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    for y, name in enumerate(names):
        if name in slow:
            axes.barh(y, _hours(end_us - onset_us), left=_hours(onset_us), height=0.8, color="#fde0dd")
        for span in (s for s in spans if s.node_id == name):
            stop = end_us if span.end_us is None else span.end_us
            color = SLOW_COLOR if name in slow else FALSE_POSITIVE_COLOR
            axes.barh(y, _hours(stop - span.start_us), left=_hours(span.start_us), height=0.45, color=color)
            if name in slow and span.start_us >= onset_us:
                axes.annotate(
                    f"+{(span.start_us - onset_us) / 60e6:.0f} min",
                    (_hours(span.start_us), y),
                    xytext=(-4, 0),
                    textcoords="offset points",
                    ha="right",
                    va="center",
                    fontsize=8,
                )
    axes.axvline(_hours(onset_us), color="black", linestyle="--", linewidth=1.0)
    axes.set_yticks(range(len(names)), names, fontsize=9)
    axes.set_ylim(-0.7, len(names) - 0.3)
    axes.set_xlim(0, _hours(end_us) * 1.01)
    axes.set_xlabel("trace time (hours of event time)")
    axes.set_title("The blacklist over time (labels: minutes from fault onset to blacklisting)")
    handles = [
        Patch(color="#fde0dd", label="fault active on an injected slow node"),
        Patch(color=SLOW_COLOR, label="blacklisted, really slow"),
        Line2D([], [], color="black", linestyle="--", label="fault onset"),
    ]
    if any(span.node_id not in slow for span in spans):
        handles.insert(2, Patch(color=FALSE_POSITIVE_COLOR, label="blacklisted, healthy (false positive)"))
    figure.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    figure.savefig(path)


def plot_ci_low(
    history: RunHistory,
    slow: Collection[str],
    listed: dict[str, int],
    floor: float | None,
    min_tasks: int,
    onset_us: int,
    path: Path,
    floor_used: bool = True,
) -> None:
    """Every node's lower interval end per ranking (once it has ``min_tasks`` samples) against the floor.

    ``listed`` maps each node ever blacklisted to when it first was; that moment gets a marker.
    """
    figure = Figure(figsize=(9, 5.2), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    for name in history.node_ids():
        points = [
            (p.boundary_us, p.nodes[name].ci_low)
            for p in history.points
            if name in p.nodes and p.nodes[name].n >= min_tasks and p.nodes[name].ci_low is not None
        ]
        hours = [_hours(t) for t, _ in points]
        values = [float(v) for _, v in points if v is not None]
        if name in slow:
            color, width, alpha, order = SLOW_COLOR, 1.8, 1.0, 3
        elif name in listed:
            color, width, alpha, order = FALSE_POSITIVE_COLOR, 1.4, 1.0, 2
        else:
            color, width, alpha, order = HEALTHY_COLOR, 0.7, 0.5, 1
        axes.plot(hours, values, color=color, linewidth=width, alpha=alpha, zorder=order)
        if name in listed and listed[name] in [t for t, _ in points]:
            at = [t for t, _ in points].index(listed[name])
            axes.plot(hours[at], values[at], "v", color="black", markersize=7, zorder=4)
    if floor is not None:
        axes.axhline(floor, color="black", linestyle=":", linewidth=1.2)
    axes.axvline(_hours(onset_us), color="black", linestyle="--", linewidth=1.0)
    handles = [
        Line2D([], [], color=SLOW_COLOR, linewidth=1.8, label="injected slow node"),
        Line2D([], [], color=HEALTHY_COLOR, linewidth=0.7, label="healthy node"),
        Line2D([], [], linestyle="none", marker="v", color="black", label="first blacklisted"),
        Line2D([], [], color="black", linestyle="--", label="fault onset"),
    ]
    if any(name not in slow for name in listed):
        handles.insert(
            2, Line2D([], [], color=FALSE_POSITIVE_COLOR, linewidth=1.4, label="healthy node that was blacklisted")
        )
    if floor is not None:
        handles.append(Line2D([], [], color="black", linestyle=":", label=_floor_label(floor, floor_used)))
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
    axes.set_xlabel("trace time (hours of event time; each point is one ranking)")
    axes.set_ylabel("ci_low: lower end of the 95 % interval of z")
    axes.set_title(f"Lower interval end of every node with at least {min_tasks} samples, over time")
    axes.grid(alpha=0.3)
    figure.savefig(path)


def plot_grouped_bars(
    groups: list[str],
    series: dict[str, list[float]],
    ylabel: str,
    path: Path,
    ylim: tuple[float, float] | None = None,
    title: str | None = None,
) -> None:
    """Bars of ``series`` (name -> one value per group) side by side within each group; the legend sits below
    the axes (inside, it hid the first group's bars)."""
    figure = Figure(figsize=(max(6.0, 1.8 * len(groups)), 4.8), dpi=DPI)
    axes = figure.add_subplot()
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        places = [g + i * width for g in range(len(groups))]
        axes.bar(places, values, width, label=name)
        for x, value in zip(places, values, strict=True):
            if value == 0:  # a bar of height 0 is invisible: say it is there
                axes.text(x, 0, "0", ha="center", va="bottom", fontsize=7)
    axes.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title, fontsize="medium")
    if ylim is not None:
        axes.set_ylim(*ylim)
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.legend(fontsize="small", ncols=min(5, len(series)), loc="upper center", bbox_to_anchor=(0.5, -0.1),
                frameon=False)  # fmt: skip
    figure.tight_layout()
    figure.savefig(path)  # the format by the suffix (--plot takes .png, .svg or .pdf)
