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
from streams.core.evaluation.report import COLUMNS, ONLINE, PROTOCOL, score_row, summarise
from streams.core.evaluation.runner import MethodScore, evaluate_method, job_truths
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext

DEFAULT_METHODS = (
    "nurd", "nurd-nc", "supervised", "supervised-node", "hazard", "nurd-batch", "spark", "hadoop", "hst", "elapsed-tau"
)  # fmt: skip


PROGRESS_EVERY_S = 10.0  # a line on stderr this often while one method runs (nurd-batch takes minutes on big jobs)


class _ProgressClock:
    """The clock ``evaluate_method`` times the methods with (ns), which also says how far the method has got.

    ``replay_jobs`` reads the clock before and after each event, so every other reading starts an event: a line
    goes out at such a reading (outside the method's timed work) once ``every_s`` passed since the last line.
    """

    def __init__(self, name: str, events: int, err: Console, every_s: float) -> None:
        self.name, self.events, self.err, self.every_s = name, events, err, every_s
        self.readings = 0
        self.started = self.last = time.perf_counter()

    def __call__(self) -> int:
        if self.readings % 2 == 0:
            now = time.perf_counter()
            if now - self.last >= self.every_s:
                self.last = now
                self.report(now)
        self.readings += 1
        return time.perf_counter_ns()

    def report(self, now: float) -> None:
        done = self.readings // 2  # events started so far, over the oracle run then the online one
        run, at = ("online threshold", done - self.events) if done >= self.events else ("oracle tau", done)
        self.err.print(f"{self.name}: {now - self.started:.0f} s, event {at:,} of {self.events:,} ({run} run)",
                       markup=False, highlight=False, soft_wrap=True)  # fmt: skip


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
        clock = _ProgressClock(name, events, err, PROGRESS_EVERY_S)
        with err.status(f"{name} on {len(truths)} job(s) ({events:,} events)"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn's convergence chatter on tiny refits
            scores[name] = evaluate_method(name, jobs, truths, context, online, clock)
        f1 = ", ".join(f"{job_id} {s.oracle.f1_in_time or 0.0:.2f}" for job_id, s in scores[name].items())
        err.print(f"{name}: F1 in time {f1} ({time.perf_counter() - started:.1f} s)", soft_wrap=True)
    return [score_row(scores[name][job_id]) for job_id in truths for name in names]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


COLUMN_HELP = (
    "Columns: 'F1 in time' (the primary score) counts a straggler's flag only when a copy relaunched at the "
    "flag, taking the job's median duration, would finish before the original; 'F1 <25%', '<50%', '<75%' "
    "count it only when raised before that share of the task's duration; 'F1 ever (paper)' is the Nurd "
    "paper's F1, any flag before the task finished (secondary: it rewards flags a second before the end); "
    "'precision' = flagged tasks that were stragglers; 'flag at' = mean elapsed/duration when a straggler is "
    "first flagged; 'late' = flags only on the checkpoint that coincides with the finish; 'in time' = "
    "stragglers flagged in time; 'online' = F1 in time with the online threshold (tau-based methods only). "
    "False positives count the same in every F1."
)


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("method", *columns):
        table.add_column(column, justify="left" if column == "method" else "right", no_wrap=True)
    return table


SCORES = ("f1_in_time", "f1_at_25", "f1_at_50", "f1_at_75", "f1")
SCORE_HEADS = ("F1 in time", "F1 <25%", "F1 <50%", "F1 <75%", "F1 ever (paper)")


def print_tables(out: Console, rows: list[dict[str, Any]], summary: dict[str, dict[str, Any]]) -> None:
    out.print(f"Protocol: {PROTOCOL}.", markup=False)
    if any(r["online"] is not None for r in rows):
        out.print(f"'online': {ONLINE}; '-' for methods that do not use tau.", markup=False)
    else:  # --no-online, or no method that uses tau: '-' everywhere, not a statement about each method
        out.print("'online': not run ('-' throughout).", markup=False)
    for job_id in dict.fromkeys(r["job_id"] for r in rows):
        mine = [r for r in rows if r["job_id"] == job_id]
        first = mine[0]
        title = (
            f"job {job_id}: {first['n_tasks']} tasks, {first['n_stragglers']} stragglers, tau {first['tau_s']:.0f} s, "
            f"median {first['relaunch_s']:.0f} s"
        )
        table = _table(title, (*SCORE_HEADS, "precision", "TPR", "FPR", "flag at", "late", "in time", "online",
                               "µs/ckpt"))  # fmt: skip
        for r in mine:
            online = r["online"]
            table.add_row(
                r["method"], *(_fmt(r[key]) for key in SCORES), _fmt(r["precision"]), _fmt(r["tpr"]),
                _fmt(r["fpr"]), _fmt(r["mean_flag_time"]), str(r["late_flags"]),
                f"{r['in_time']}/{r['n_stragglers']}", _fmt(online["f1_in_time"] if online else None),
                f"{r['us_per_checkpoint']:.0f}",
            )  # fmt: skip
        out.print(table)
    table = _table("mean over jobs", (*SCORE_HEADS, "precision", "TPR", "FPR", "online", "µs/ckpt"))
    for name, s in summary.items():
        online = s["online"]
        table.add_row(
            name, *(_fmt(s[f"mean_{key}"]) for key in SCORES), _fmt(s["mean_precision"]), _fmt(s["mean_tpr"]),
            _fmt(s["mean_fpr"]), _fmt(online["f1_in_time"] if online else None), f"{s['us_per_checkpoint']:.0f}",
        )  # fmt: skip
    out.print(table)
    out.print(COLUMN_HELP, markup=False)


def plot_f1(rows: list[dict[str, Any]], methods: Iterable[str], path: str, title: str | None = None) -> None:
    """Grouped bars: F1 in time per job (groups) and method (bars), oracle tau."""
    from laggard.report.plots import plot_grouped_bars

    jobs = list(dict.fromkeys(r["job_id"] for r in rows))
    f1 = {(r["job_id"], r["method"]): r["f1_in_time"] for r in rows}
    series = {m: [f1.get((job, m), 0.0) for job in jobs] for m in methods if any(r["method"] == m for r in rows)}
    try:
        plot_grouped_bars(jobs, series, "F1 in time (oracle p90 threshold)", Path(path), ylim=(0, 1), title=title)
    except OSError as exc:
        raise UserError(f"cannot write plot {path}: {exc.strerror or exc}") from None


@click.command(
    "eval",
    epilog=formats_epilog(),
    help="Evaluate straggler prediction methods on a trace, job by job.\n\n"
    "Uses the oracle p90 threshold protocol of the Nurd paper and reports an online threshold beside it. "
    + COLUMN_HELP
    + "\n\nWith --heldout, every candidate configuration of every family (supervised and supervised-node: h's "
    "window 20/50/200 with and without the target scaler; nurd: g's learning rate 0.01/0.05 and epsilon "
    "0.05/0.3; hazard without node features, with them and with the local ones (hazard-local: the job's tasks "
    "on the same machine, the node's window mean z): p 0.3/0.5/0.7; select (Spark's rules, spark-node and "
    "hazard in shadow, following another member once its per-job lead is beyond z standard errors): first "
    "member spark-q0.9-m3/spark-q0.75-m1.5/spark-node, z 0/1; the fixed rules spark-q0.75-m1.5, "
    "spark-q0.9-m3, spark-node, node-slow, hadoop, hawkeye; elapsed-tau as a yardstick) runs over the "
    "traces, and each family's configuration is chosen on all jobs but one and scored on that one (or all "
    "traces but one, when --trace is given several times): the leave-one-out table.\n\n"
    "Example: laggard eval --trace google2011-usage --methods nurd,supervised,spark (the usage series under "
    "LAGGARD_TRACES_DIR; google2011-usage:DIR for others)",
)
@click.option(
    "--trace",
    "specs",
    required=True,
    multiple=True,
    metavar="FORMAT:PATH",
    help="e.g. google2011-usage:DIR (DIR: one job or one sub-directory per job); several only with --heldout",
)
@click.option(
    "--methods",
    default=None,
    help=f"comma list of: {method_choices()} [default: {','.join(DEFAULT_METHODS)}; with --heldout, the "
    "families to compare, default all]",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1),
    default=None,
    help="Nurd calibration alpha [default: setting LAGGARD_NURD_ALPHA]; the paper uses 0.5, its code 0",
)
@click.option(
    "--initial-fraction",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),  # 1: every task finished first, none predicted
    default=None,
    help="share of a job's tasks that must finish before predicting [default: setting, 0.04]",
)
@click.option(
    "--online/--no-online", default=True, show_default=True,
    help="also run tau-based methods with the online threshold; with --heldout: choose and score on the online "
    "threshold only (--no-online: the oracle p90)",
)  # fmt: skip
@click.option("--heldout", is_flag=True, help="the leave-one-out table of configurations chosen on held-out jobs")
@click.option("--repeats", type=click.IntRange(1, 100), default=3, show_default=True,
              help="with --heldout: seeded relaunch draws per job for the JCT change")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print one JSON document on stdout instead of tables")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="write a plot of F1 in time per job, method (.png, .svg or .pdf)")
def eval_(specs: tuple[str, ...], methods: str | None, alpha: float | None, initial_fraction: float | None,
          online: bool, heldout: bool, repeats: int, as_json: bool, plot: str | None) -> None:  # fmt: skip
    context = prediction_context(alpha, initial_fraction)
    err = Console(stderr=True)
    if heldout:
        from laggard.commands.heldout import emit, run_heldout

        if plot:  # it returned with no plot and no word
            raise click.UsageError("--plot draws one trace's jobs; it does not apply with --heldout")

        given = None if methods is None else [n.strip() for n in methods.split(",") if n.strip()]
        if given == []:
            raise click.UsageError("--methods names no method")
        emit(run_heldout(specs, given, context, online, repeats, err), as_json)
        return
    if len(specs) > 1:
        raise click.UsageError("give one --trace (several traces are compared only with --heldout)")
    spec = specs[0]
    names = parse_methods(",".join(DEFAULT_METHODS) if methods is None else methods)  # '' names none: an error
    check_plot_dir(plot)
    jobs, trace = load_jobs(spec, err)
    require_checkpoints(jobs, spec)
    rows = evaluate_jobs(jobs, names, context, online, err)
    summary = summarise(rows, names)
    alpha_used = context.params["nurd_alpha"]
    if plot:
        plot_f1(rows, names, plot, f"F1 in time per job and method, alpha {alpha_used:g}: {spec}")
        err.print(f"wrote {plot}")
    if as_json:
        document = {"trace": spec, "protocol": PROTOCOL, "columns": COLUMNS, "online_threshold": ONLINE,
                    "alpha": alpha_used, "epsilon": context.params["nurd_epsilon"],
                    "initial_fraction": context.initial_fraction, "bad_rows": trace.bad_rows, "jobs": rows,
                    "summary": summary}  # fmt: skip
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        print_tables(stdout_console(), rows, summary)
