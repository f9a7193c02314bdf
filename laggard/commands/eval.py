"""``laggard eval``: evaluate straggler prediction methods on a trace (SPEC 4 and 7).

Each job of the trace is replayed in event time through every method (each from a cold start); a task
counts once, as flagged if the method flagged it at a checkpoint before it finished. The stragglers are
the tasks at or above the job's true p90 latency, and the methods that compare against a threshold
use that same oracle tau (the paper's protocol); with ``--online`` (default) they run a second time
with a threshold estimated from what they have seen (the p90 of the job's latency estimates), which is
what a live deployment can do, and both results are reported.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from laggard.commands.options import formats_epilog, stdout_console
from laggard.commands.prediction_options import (
    check_plot_dir,
    load_jobs,
    method_choices,
    parse_methods,
    prediction_context,
    require_checkpoints,
)
from laggard.errors import UserError
from streams.core.evaluation.report import ONLINE, PROTOCOL, score_row, summarise
from streams.core.evaluation.runner import MethodScore, evaluate_method, job_truths
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext

DEFAULT_METHODS = ("nurd", "nurd-nc", "supervised", "nurd-batch", "spark", "hadoop", "hst", "elapsed-tau")


def evaluate_jobs(
    jobs: dict[str, list[Event]], names: list[str], context: PredictionContext, online: bool, err: Console
) -> list[dict[str, Any]]:
    """Rows of every method on every job that can be scored (job by job, methods in the given order)."""
    truths, skipped = job_truths(jobs, context.initial_fraction)
    for job_id, reason in skipped.items():
        err.print(f"job {job_id}: {reason}, skipped")
    events = sum(len(jobs[job_id]) for job_id in truths)
    scores: dict[str, dict[str, MethodScore]] = {}
    for name in names:
        started = time.perf_counter()
        with err.status(f"{name} on {len(truths)} job(s) ({events:,} events)"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn's convergence chatter on tiny refits
            scores[name] = evaluate_method(name, jobs, truths, context, online, time.perf_counter_ns)
        f1 = ", ".join(f"{job_id} {s.oracle.f1:.2f}" for job_id, s in scores[name].items())
        err.print(f"{name}: F1 {f1} ({time.perf_counter() - started:.1f} s)", soft_wrap=True)
    return [score_row(scores[name][job_id]) for job_id in truths for name in names]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_tables(out: Console, rows: list[dict[str, Any]], summary: dict[str, dict[str, Any]]) -> None:
    out.print(f"Protocol: {PROTOCOL}.", markup=False)
    out.print(f"'F1 online': {ONLINE}; '-' for methods that do not use tau.", markup=False)
    for job_id in dict.fromkeys(r["job_id"] for r in rows):
        mine = [r for r in rows if r["job_id"] == job_id]
        first = mine[0]
        title = (
            f"job {job_id}: {first['n_tasks']} tasks, {first['n_stragglers']} stragglers, tau {first['tau_s']:.0f} s"
        )
        table = Table(title=title, title_justify="left")
        columns = (
            "TPR", "FPR", "FNR", "F1", "precision", "flag at", "late", "in time", "F1 in time", "F1 online", "µs/ckpt"
        )  # fmt: skip
        for column in ("method", *columns):
            table.add_column(column, justify="left" if column == "method" else "right", no_wrap=True)
        for r in mine:
            online = r["online"]
            table.add_row(
                r["method"], _fmt(r["tpr"]), _fmt(r["fpr"]), _fmt(r["fnr"]), _fmt(r["f1"]), _fmt(r["precision"]),
                _fmt(r["mean_flag_time"]), str(r["late_flags"]), f"{r['in_time']}/{r['n_stragglers']}",
                _fmt(r["f1_in_time"]), _fmt(online["f1"] if online else None),
                f"{r['us_per_checkpoint']:.0f}",
            )  # fmt: skip
        out.print(table)
    table = Table(title="mean over jobs", title_justify="left")
    for column in ("method", "F1", "precision", "TPR", "FPR", "F1 in time", "F1 online", "µs/ckpt"):
        table.add_column(column, justify="left" if column == "method" else "right", no_wrap=True)
    for name, s in summary.items():
        online = s["online"]
        table.add_row(
            name, _fmt(s["mean_f1"]), _fmt(s["mean_precision"]), _fmt(s["mean_tpr"]), _fmt(s["mean_fpr"]),
            _fmt(s["mean_f1_in_time"]),
            _fmt(online["f1"] if online else None), f"{s['us_per_checkpoint']:.0f}",
        )  # fmt: skip
    out.print(table)
    out.print(
        "'flag at' = mean elapsed/duration when a true straggler is first flagged; 'late' = flags raised only on "
        "the checkpoint that coincides with the finish (not counted as predictions); 'in time' = stragglers flagged "
        "early enough that a copy relaunched at the flag, taking the job's median latency, would finish first; "
        "'F1 in time' counts the others as missed; 'precision' = flagged tasks that were stragglers (Hawkeye's "
        "straggler-identification precision).",
        markup=False,
    )


def plot_f1(rows: list[dict[str, Any]], methods: Iterable[str], path: str, title: str | None = None) -> None:
    """Grouped bars: F1 per job (groups) and method (bars), oracle tau."""
    from laggard.report.plots import plot_grouped_bars

    jobs = list(dict.fromkeys(r["job_id"] for r in rows))
    f1 = {(r["job_id"], r["method"]): r["f1"] for r in rows}
    series = {m: [f1.get((job, m), 0.0) for job in jobs] for m in methods if any(r["method"] == m for r in rows)}
    try:
        plot_grouped_bars(jobs, series, "F1 (oracle p90 threshold)", Path(path), ylim=(0, 1), title=title)
    except OSError as exc:
        raise UserError(f"cannot write plot {path}: {exc.strerror or exc}") from None


@click.command(
    "eval",
    epilog=formats_epilog(),
    help="Evaluate straggler prediction methods on a trace, job by job.\n\n"
    "Uses the oracle p90 threshold protocol of the Nurd paper and reports an online threshold beside it. "
    "Example: laggard eval --trace google2011-usage:../shared/traces/google2011-nurd-timeseries/"
    "timeseriesspecsixtotal --methods nurd,supervised,spark",
)
@click.option(
    "--trace",
    "spec",
    required=True,
    metavar="FORMAT:PATH",
    help="e.g. google2011-usage:DIR (DIR: one job or one sub-directory per job)",
)
@click.option(
    "--methods",
    default=",".join(DEFAULT_METHODS),
    show_default=True,
    help=f"comma list of: {method_choices()}",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1),
    default=None,
    help="Nurd calibration alpha [default: setting LAGGARD_NURD_ALPHA]; the paper uses 0.5, its code 0",
)
@click.option(
    "--initial-fraction",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="share of a job's tasks that must finish before predicting [default: setting, 0.04]",
)
@click.option(
    "--online/--no-online", default=True, show_default=True, help="also run tau-based methods with the online threshold"
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON document on stdout instead of tables")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="write a PNG of F1 per job and method")
def eval_(spec: str, methods: str, alpha: float | None, initial_fraction: float | None, online: bool,
          as_json: bool, plot: str | None) -> None:  # fmt: skip
    names = parse_methods(methods)
    check_plot_dir(plot)
    context = prediction_context(alpha, initial_fraction)
    err = Console(stderr=True)
    jobs, trace = load_jobs(spec, err)
    if not jobs:
        raise UserError(f"no job found in {spec}")
    require_checkpoints(jobs, spec)
    rows = evaluate_jobs(jobs, names, context, online, err)
    summary = summarise(rows, names)
    alpha_used = context.params["nurd_alpha"]
    if plot:
        plot_f1(rows, names, plot, f"F1 per job and method, alpha {alpha_used:g}: {spec}")
        err.print(f"wrote {plot}")
    if as_json:
        document = {"trace": spec, "protocol": PROTOCOL, "online_threshold": ONLINE, "alpha": alpha_used,
                    "epsilon": context.params["nurd_epsilon"], "initial_fraction": context.initial_fraction,
                    "bad_rows": trace.bad_rows, "jobs": rows, "summary": summary}  # fmt: skip
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        print_tables(stdout_console(), rows, summary)

