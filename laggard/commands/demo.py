"""``laggard demo``: a synthetic cluster with a few nodes going slow, run in-process, and a report about it.

No broker, no data to download: the synthetic generator (``producers/synthetic.py``) makes a cluster of
equal nodes, a few of which turn slow at a fault onset part-way through; the in-process pipeline ranks
the nodes and issues blacklist deltas; the report says, in words and plots, what was caught and when.
"""

from __future__ import annotations

import time
import webbrowser
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from laggard.commands.options import policies_epilog, settings_with, stdout_console
from laggard.commands.run import describe_settings, make_pipeline, ranking_options
from laggard.commands.traces import open_trace_or_fail
from laggard.errors import UserError
from laggard.report.progress import RunOutcome, trace_time
from streams.core.decision.registry import floor_policies
from streams.settings import Settings

SETTING_NAMES = (
    "policy",
    "window_size_s",
    "ranking_period_s",
    "min_tasks",
    "significance_floor",
    "max_fraction",
    "min_dwell_periods",
    "job_idle_timeout_s",
    "seed",
)


@click.command("demo", epilog=policies_epilog())
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("laggard-demo"),
    show_default=True,
    help="directory for index.html and the PNG plots (created if missing)",
)
@click.option("--nodes", type=click.IntRange(min=2), default=60, show_default=True, help="nodes in the cluster")
@click.option("--slow", type=click.IntRange(min=0), default=3, show_default=True, help="nodes that turn slow")
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="jobs (20-60 tasks each, one every 30 s on average)",
)
@click.option(
    "--onset",
    type=click.FloatRange(min=0),
    default=3000.0,
    show_default=True,
    metavar="S",
    help="seconds of event time at which the slow nodes' fault begins",
)
@click.option(
    "--slowdown",
    type=click.FloatRange(min=1),
    default=1.8,
    show_default=True,
    help="how much slower work runs on a slow node after the onset",
)
@click.option(
    "--contention",
    type=click.Choice(["cpu", "memory"]),
    default="cpu",
    show_default=True,
    help="cpu: a constant stretch; memory: an uneven one (higher mean and spread)",
)
@click.option("--seed", "trace_seed", type=int, default=0, show_default=True, help="seed of the generated cluster")
@ranking_options
@click.option(
    "--open/--no-open",
    "open_browser",
    default=False,
    show_default=True,
    help="open the report in a web browser at the end",
)
def demo(
    out_dir: Path,
    nodes: int,
    slow: int,
    jobs: int,
    onset: float,
    slowdown: float,
    contention: str,
    trace_seed: int,
    open_browser: bool,
    **ranking: Any,
) -> None:
    """Run a synthetic cluster in-process and write a report (no broker needed).

    About 60 nodes, 3 of them slow from a fault onset part-way through, a few hundred jobs. Progress goes to
    stderr; a summary goes to stdout; index.html and PNG plots go to --out.
    """
    started = time.perf_counter()
    if slow > nodes:
        raise UserError(f"--slow {slow} is more than --nodes {nodes}")
    settings = settings_with(**ranking)
    spec = (
        f"synthetic:nodes={nodes},slow={slow},jobs={jobs},seed={trace_seed},onset={onset:g},"
        f"slowdown={slowdown:g},contention={contention}"
    )
    trace = open_trace_or_fail(spec)
    _prepare(out_dir)
    from laggard.report.history import RunHistory

    history = RunHistory()
    pipeline = make_pipeline(settings, on_ranking=history)
    err = Console(stderr=True, soft_wrap=True)
    err.print(
        f"[bold]laggard demo[/]: {nodes} nodes, {slow} slow from {trace_time(round(onset * 1e6))}, "
        f"{jobs} jobs; {describe_settings(settings)}"
    )
    from laggard.report.progress import run_with_progress

    outcome = run_with_progress(trace, pipeline, err, label="demo")
    index = _write(outcome, history, settings, spec, out_dir)
    console = stdout_console()
    last_us = outcome.pipeline.counts.last_ts_us
    if slow and last_us <= onset * 1e6:  # recall 0 % and "never" for every slow node would read as a miss
        err.print(f"note: the trace ended at {trace_time(last_us)}, before the fault onset at "
                  f"{trace_time(round(onset * 1e6))}: no node was ever slow (more --jobs or an earlier --onset)")
    print_summary(outcome, console)
    console.print(f"\nReport: [bold]{index.resolve()}[/] (written in {time.perf_counter() - started:.1f} s)")
    if open_browser and not webbrowser.open(index.resolve().as_uri()):
        err.print(f"no web browser to open here: open {index.resolve().as_uri()}")


def _prepare(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the report directory {out_dir}: {exc.strerror or exc}") from exc


def _write(outcome: RunOutcome, history: Any, settings: Settings, spec: str, out_dir: Path) -> Path:
    from laggard.report.html import DemoReport, write_report
    from laggard.report.plots import plot_blacklist_timeline, plot_ci_low, plot_intervals

    truth = outcome.trace.ground_truth or {}
    slow_nodes = set(truth.get("slow_nodes", []))
    onset_us = int(truth.get("onset_us", 0))
    end_us = max(outcome.pipeline.counts.last_ts_us, 1)
    score = outcome.detection
    assert score is not None  # a synthetic trace always has its ground truth
    pcores = settings.policy in ("pcores", "pcores-top-k")
    floored = settings.policy in floor_policies()
    plots = {
        "intervals.png": "Each node's mean z and 95 % interval in the final window"
        + (", coloured by P-Cores level (level 0: nothing clearly slower)" if pcores else "")
        + "; blacklisted nodes boxed; injected slow nodes in red."
        + ("" if pcores else f" Policy {settings.policy} lists from its own evidence (each listing's reason says "
                             "which); the window statistics are shown for comparison."),
        "blacklist.png": "The blacklist over time: the fault period of each injected slow node shaded, each stay "
        "on the blacklist a bar, the fault onset dashed.",
        "ci_low.png": "The lower end of each node's 95 % interval at every ranking: "
        + ("a node can only be blacklisted once it rises above the significance floor." if floored else
           "the significance floor is P-Cores' guard, drawn for comparison; policy "
           f"{settings.policy} does not use it."),
    }
    floor = settings.significance_floor
    last = outcome.pipeline.last_ranking
    try:
        if last is not None:
            plot_intervals(last.ranking, slow_nodes, floor, out_dir / "intervals.png", floored)
        else:
            del plots["intervals.png"]
        plot_blacklist_timeline(score.spans(), slow_nodes, onset_us, end_us, out_dir / "blacklist.png")
        first = {node: score.first_blacklisted_us(node) or 0 for node in score.blacklisted}
        plot_ci_low(history, slow_nodes, first, floor, settings.min_tasks, onset_us, out_dir / "ci_low.png",
                    floored)
        chosen = {name: getattr(settings, name) for name in SETTING_NAMES}
        chosen["trace"] = spec
        command = "laggard demo" if str(out_dir) == "laggard-demo" else f"laggard demo --out {out_dir}"
        return write_report(DemoReport(outcome, chosen, command, plots), out_dir)
    except OSError as exc:
        raise UserError(f"cannot write the report into {out_dir}: {exc.strerror or exc}") from exc


def print_summary(outcome: RunOutcome, console: Console) -> None:
    """The slow and blacklisted nodes with their final statistics, then detection scores."""
    from laggard.report.terminal import interval, print_detection

    score = outcome.detection
    last = outcome.pipeline.last_ranking
    slow = set(score.slow_nodes) if score else set()
    shown = sorted(slow | (set(score.blacklisted) if score else set()))
    if last is not None and shown:
        rows = last.ranking.by_node()
        table = Table(title="Slow and blacklisted nodes in the final window", title_justify="left")
        for name in ("node", "slow?", "level", "n", "mean z", "95% interval", "listed?"):
            table.add_column(name, justify="right" if name in ("level", "n", "mean z") else "left")
        for node in shown:
            row = rows.get(node)
            s = row.stats if row else None
            table.add_row(
                node,
                "yes" if node in slow else "[orange1]no[/]",
                "-" if row is None or row.level is None else str(row.level),
                "-" if s is None else str(s.n),
                "-" if s is None else f"{s.mean:+.3f}",
                "-" if s is None else interval(s.ci_low, s.ci_high),
                "[red]yes[/]" if row is not None and row.blacklisted else "no",
            )
        console.print(table)
    if score is not None:
        print_detection(score, console)
