"""``laggard eval``: evaluate straggler prediction methods on a trace (SPEC 4 and 7).

Each job of the trace is replayed in event time through every method (each from a cold start); a task
counts once, as flagged if the method flagged it at a checkpoint before it finished. The stragglers are
the tasks at or above the job's true p90 latency, and the methods that compare against a threshold
use that same oracle tau (the paper's protocol); with ``--online`` (default) they run a second time
with a threshold estimated from what they have seen (the p90 of the job's latency estimates), which is
what a live deployment can do, and both results are reported.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from laggard.commands.options import formats_epilog, settings_with, stdout_console
from laggard.errors import UserError
from streams.core.evaluation.prediction import Metrics, Truth, drive, job_truth, score
from streams.core.events import Event, TaskCheckpoint
from streams.core.prediction.methods import ALIASES, METHODS, Options, make_method, uses_threshold

DEFAULT_METHODS = ("nurd", "nurd-nc", "supervised", "nurd-batch", "spark", "hadoop", "hst", "elapsed-tau")
PROTOCOL = (
    "oracle threshold: a straggler is a task at or above its job's true p90 latency "
    "(sorted(latencies)[int(0.9 n)]), and tau-based methods flag against that same tau, as in the Nurd paper; "
    "each task counts once (flagged at a checkpoint before it finished); FPR excludes the initial training set"
)
ONLINE = "online threshold: tau = p90 of the job's latency estimates known at the time (no oracle)"


def parse_methods(text: str) -> list[str]:
    """Method names from a comma list, ``spark`` expanding to both parameter sets."""
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        expanded = ALIASES.get(name, (name,))
        for item in expanded:
            if item not in METHODS:
                known = ", ".join([*METHODS, *ALIASES])
                raise UserError(f"unknown method {name!r}: choose from {known}")
            if item not in names:
                names.append(item)
    if not names:
        raise UserError("--methods names no method")
    return names


def load_jobs(spec: str, err: Console) -> tuple[dict[str, list[Event]], Any]:
    """The trace's events grouped by job, and the trace (for its counters)."""
    from producers.registry import open_trace

    try:
        trace = open_trace(spec)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"{exc.strerror or exc}: {exc.filename}") from None
    jobs: dict[str, list[Event]] = defaultdict(list)
    try:
        for event in trace:
            jobs[event.job_id].append(event)
    except (ValueError, OSError) as exc:
        raise UserError(f"reading {spec}: {exc}") from None
    err.print(f"read {trace.events} events of {len(jobs)} jobs ({trace.bad_rows} bad rows skipped)")
    return dict(jobs), trace


def require_checkpoints(jobs: dict[str, list[Event]], spec: str, hint: str = "") -> None:
    """Methods flag running tasks at their checkpoints: a trace with none would score 0 everywhere."""
    if not any(isinstance(e, TaskCheckpoint) for events in jobs.values() for e in events):
        raise UserError(
            f"{spec} has no task checkpoints, so no method can flag a running task: use a trace with usage "
            f"series (google2011-usage:DIR){hint}"
        )


def check_plot_dir(plot: str | None) -> None:
    """Fail before the work, not after it, when the plot could not be written."""
    if plot and not Path(plot).expanduser().resolve().parent.is_dir():
        raise UserError(f"cannot write plot {plot}: its directory does not exist")


def nurd_options(alpha: float | None, initial_fraction: float | None = None) -> Options:
    """The methods' hyperparameters: the settings, with the command line on top."""
    settings = settings_with()
    return Options(
        alpha=settings.nurd_alpha if alpha is None else alpha,
        epsilon=settings.nurd_epsilon,
        initial_fraction=settings.nurd_initial_fraction if initial_fraction is None else initial_fraction,
    )


def _metrics_fields(m: Metrics) -> dict[str, Any]:
    return {"tpr": m.tpr, "fpr": m.fpr, "fnr": m.fnr, "f1": m.f1, "in_time": m.in_time, "f1_in_time": m.f1_in_time}


def run_method(name: str, events: list[Event], truth: Truth, options: Options, online: bool) -> dict[str, Any]:
    """One row of the report: the method on one job, oracle tau, and the online threshold beside it."""
    tau_based = uses_threshold(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's convergence chatter on tiny refits
        run = drive(make_method(name, truth.tau_s, options).observe, events, time.perf_counter_ns)
        second = drive(make_method(name, None, options).observe, events, time.perf_counter_ns) if (
            online and tau_based
        ) else None  # fmt: skip
    m = score(truth.durations_s, run.first_flag_elapsed_s(), truth.initial, truth.tau_s, truth.median_s)
    row: dict[str, Any] = {
        "job_id": "", "method": name, "n_tasks": m.n_tasks, "n_stragglers": m.n_stragglers,
        **_metrics_fields(m), "us_per_checkpoint": run.us_per_checkpoint,
        "tau_s": truth.tau_s, "relaunch_s": truth.median_s, "uses_tau": tau_based, "n_initial": m.n_initial,
        "tp": m.tp, "fp": m.fp, "fn": m.fn, "tn": m.tn, "late_flags": m.late, "mean_flag_time": m.flag_time,
        "checkpoints": run.checkpoints, "elapsed_ns": run.elapsed_ns, "online": None,
    }  # fmt: skip
    if second is not None:
        o = score(truth.durations_s, second.first_flag_elapsed_s(), truth.initial, truth.tau_s, truth.median_s)
        row["online"] = {**_metrics_fields(o), "us_per_checkpoint": second.us_per_checkpoint,
                         "late_flags": o.late, "mean_flag_time": o.flag_time}  # fmt: skip
    return row


def summarise(rows: list[dict[str, Any]], methods: list[str]) -> dict[str, dict[str, Any]]:
    """Means over jobs per method; us_per_checkpoint is total time over total checkpoints."""
    summary: dict[str, dict[str, Any]] = {}
    for name in methods:
        mine = [r for r in rows if r["method"] == name]
        if not mine:
            continue
        checkpoints = sum(r["checkpoints"] for r in mine)
        entry: dict[str, Any] = {
            "mean_f1": statistics.fmean(r["f1"] for r in mine),
            "mean_tpr": statistics.fmean(r["tpr"] for r in mine),
            "mean_fpr": statistics.fmean(r["fpr"] for r in mine),
            "mean_fnr": statistics.fmean(r["fnr"] for r in mine),
            "mean_f1_in_time": statistics.fmean(r["f1_in_time"] for r in mine),
            "us_per_checkpoint": sum(r["elapsed_ns"] for r in mine) / 1e3 / checkpoints if checkpoints else 0.0,
            "jobs": len(mine),
            "online": None,
        }
        online = [r["online"] for r in mine if r["online"] is not None]
        if online:
            keys = ("f1", "tpr", "fpr", "f1_in_time")
            entry["online"] = {key: statistics.fmean(o[key] for o in online) for key in keys}
        summary[name] = entry
    return summary


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
        columns = ("TPR", "FPR", "FNR", "F1", "flag at", "late", "in time", "F1 in time", "F1 online", "µs/ckpt")
        for column in ("method", *columns):
            table.add_column(column, justify="left" if column == "method" else "right", no_wrap=True)
        for r in mine:
            online = r["online"]
            table.add_row(
                r["method"], _fmt(r["tpr"]), _fmt(r["fpr"]), _fmt(r["fnr"]), _fmt(r["f1"]),
                _fmt(r["mean_flag_time"]), str(r["late_flags"]), f"{r['in_time']}/{r['n_stragglers']}",
                _fmt(r["f1_in_time"]), _fmt(online["f1"] if online else None),
                f"{r['us_per_checkpoint']:.0f}",
            )  # fmt: skip
        out.print(table)
    table = Table(title="mean over jobs", title_justify="left")
    for column in ("method", "F1", "TPR", "FPR", "F1 in time", "F1 online", "µs/ckpt"):
        table.add_column(column, justify="left" if column == "method" else "right", no_wrap=True)
    for name, s in summary.items():
        online = s["online"]
        table.add_row(
            name, _fmt(s["mean_f1"]), _fmt(s["mean_tpr"]), _fmt(s["mean_fpr"]), _fmt(s["mean_f1_in_time"]),
            _fmt(online["f1"] if online else None), f"{s['us_per_checkpoint']:.0f}",
        )  # fmt: skip
    out.print(table)
    out.print(
        "'flag at' = mean elapsed/duration when a true straggler is first flagged; 'late' = flags raised only on "
        "the checkpoint that coincides with the finish (not counted as predictions); 'in time' = stragglers flagged "
        "early enough that a copy relaunched at the flag, taking the job's median latency, would finish first; "
        "'F1 in time' counts the others as missed.",
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
    help=f"comma list of: {', '.join([*METHODS, *ALIASES])}",
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
    options = nurd_options(alpha, initial_fraction)
    err = Console(stderr=True)
    jobs, trace = load_jobs(spec, err)
    if not jobs:
        raise UserError(f"no job found in {spec}")
    require_checkpoints(jobs, spec)
    rows = evaluate_jobs(jobs, names, options, online, err)
    summary = summarise(rows, names)
    if plot:
        plot_f1(rows, names, plot, f"F1 per job and method, alpha {options.alpha:g}: {spec}")
        err.print(f"wrote {plot}")
    if as_json:
        document = {"trace": spec, "protocol": PROTOCOL, "online_threshold": ONLINE, "alpha": options.alpha,
                    "epsilon": options.epsilon, "initial_fraction": options.initial_fraction,
                    "bad_rows": trace.bad_rows, "jobs": rows, "summary": summary}  # fmt: skip
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        print_tables(stdout_console(), rows, summary)


def evaluate_jobs(
    jobs: dict[str, list[Event]], names: list[str], options: Options, online: bool, err: Console
) -> list[dict[str, Any]]:
    rows = []
    for job_id, events in jobs.items():
        truth = job_truth(events, options.initial_fraction)
        if len(truth.durations_s) < 2:
            err.print(f"job {job_id}: fewer than 2 finished tasks, skipped")
            continue
        for name in names:
            started = time.perf_counter()
            with err.status(f"job {job_id}: {name} ({len(events):,} events)"):  # a spinner on a terminal
                row = run_method(name, events, truth, options, online)
            row["job_id"] = job_id
            rows.append(row)
            err.print(f"job {job_id} {name}: F1 {row['f1']:.2f} ({time.perf_counter() - started:.1f} s)")
    return rows
