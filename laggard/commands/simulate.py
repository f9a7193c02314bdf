"""``laggard simulate``: would acting on straggler flags shorten jobs? (SPEC 7, Nurd's Algorithms 2 and 3).

Each job of the trace runs every method as ``laggard eval`` does; the flags then drive a scheduler that
terminates a flagged task and relaunches it on a new machine, at once (Algorithm 2, ``unlimited``) or only
when a machine is free (Algorithm 3, ``K`` spare machines plus those the job's finished tasks release). A
relaunched copy takes a duration drawn from the job's non-straggler durations; each setting is repeated with
``--repeats`` seeded draws and averaged. The model is written down in ``streams.core.evaluation.simulation``.
"""

from __future__ import annotations

import warnings
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
from laggard.report.terminal import percent
from streams.core.evaluation.mitigation import PERFECT, PERFECT_NOTE, simulate_jobs, summarise
from streams.core.evaluation.simulation import Mode

DEFAULT_METHODS = "nurd,supervised,spark,hadoop,elapsed-tau"
MODES = {
    "relaunch": "a flagged task is terminated and relaunched on a new machine (Nurd's schedulers)",
    "speculate": "a flagged task keeps running beside a copy on a new machine; the first to finish wins",
}
MODEL = (
    "the copy takes a duration drawn from the "
    "job's non-straggler durations (below the oracle p90 tau); unlimited = Algorithm 2 (relaunch at the flag), "
    "K = Algorithm 3 (K spare machines plus those the job's finished tasks release; a task that finds none "
    "asks again at its next checkpoint; a relaunched task's original machine never returns to the pool)"
)


def parse_spares(text: str) -> list[int | None]:
    """``unlimited,0,50`` -> [None, 0, 50]; None stands for Algorithm 2."""
    settings: list[int | None] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item == "unlimited":
            value: int | None = None
        elif item.isascii() and item.isdigit():
            value = int(item)
        else:
            raise click.UsageError(f"--spares takes 'unlimited' or a count of machines, not {raw.strip()!r}")
        if value not in settings:
            settings.append(value)
    if not settings:
        raise click.UsageError("--spares names no setting")
    return settings


def spares_label(spares: int | str | None) -> str:
    """'unlimited' or 'K spare', from a setting, a row's ``spares`` or a summary key."""
    return "unlimited" if spares is None or spares == "unlimited" else f"{spares} spare"


def _count(value: float) -> str:
    """A count averaged over draws: whole numbers without a decimal point."""
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def print_tables(out: Console, rows: list[dict[str, Any]], summary: dict[str, Any], threshold: str, mode: str) -> None:
    out.print(f"Mode: {MODES[mode]}; {MODEL}.", markup=False)
    out.print(f"Threshold: {threshold}.", markup=False)
    settings = list(dict.fromkeys(str(r["spares"]) for r in rows))
    for job_id in dict.fromkeys(r["job_id"] for r in rows):
        mine = [r for r in rows if r["job_id"] == job_id]
        first = mine[0]
        title = f"job {job_id}: {first['n_tasks']} tasks, JCT {first['jct_base_s']:.0f} s without mitigation"
        table = Table(title=title, title_justify="left")
        table.add_column("method", no_wrap=True)
        for key in settings:
            label = spares_label(key)
            for column in ("JCT cut", "relaunches", "success", "wasted"):
                table.add_column(f"{label}: {column}" if column == "JCT cut" else column, justify="right")
        for name in dict.fromkeys(r["method"] for r in mine):
            cells = []
            for key in settings:
                r = next(r for r in mine if r["method"] == name and str(r["spares"]) == key)
                asked = r["relaunches"] + r["unserved"]
                relaunches = _count(r["relaunches"]) + (f" of {_count(asked)}" if r["unserved"] else "")
                wasted = f"{r['wasted_s'] / 3600:.2f} h"
                cells += [percent(r["reduction"]), relaunches, percent(r["success_rate"]), wasted]
            table.add_row(name, *cells)
        out.print(table)
    table = Table(title="mean over jobs", title_justify="left")
    table.add_column("method", no_wrap=True)
    for key in settings:
        label = spares_label(key)
        table.add_column(f"{label}: JCT cut", justify="right")
        table.add_column("success", justify="right")
        table.add_column("wasted", justify="right")
    for name, by_setting in summary.items():
        cells = []
        for key in settings:
            s = by_setting[key]
            cells += [percent(s["mean_reduction"]), percent(s["success_rate"]), f"{s['wasted_s_per_job'] / 3600:.2f} h"]
        table.add_row(name, *cells)
    out.print(table)
    out.print(
        "'JCT cut' = 1 - job completion time with mitigation / without (negative: the job ended later); "
        "'relaunches' per job (mean over draws; 'x of y': y flagged tasks asked, x found a machine); "
        "'success' = relaunched copies that finished before the "
        "original would have; 'wasted' = machine hours per job spent on attempts that did not produce the "
        f"result (terminated originals, lost races). {PERFECT_NOTE}.",
        markup=False,
    )


def plot_reductions(summary: dict[str, dict[str, dict[str, Any]]], path: str, title: str) -> None:
    from laggard.report.plots import plot_grouped_bars

    methods = list(summary)
    settings = list(dict.fromkeys(key for by_setting in summary.values() for key in by_setting))
    series = {
        spares_label(key): [
            100 * summary[m][key]["mean_reduction"] if key in summary[m] else 0.0 for m in methods
        ]
        for key in settings
    }
    try:
        plot_grouped_bars(methods, series, "job completion time cut, mean over jobs (%)", Path(path), title=title)
    except OSError as exc:
        raise UserError(f"cannot write plot {path}: {exc.strerror or exc}") from None


@click.command(
    "simulate",
    epilog=formats_epilog(),
    help="Replay each job with a scheduler that relaunches flagged tasks, and measure the job completion "
    "time saved (Nurd's Algorithms 2 and 3). A scheduler that honours the blacklist instead is simulated by "
    "laggard run and laggard demo.\n\n"
    "Example: laggard simulate --trace google2011-usage --methods nurd,supervised,spark --spares unlimited,0 "
    "--plot jct.png (the usage series under LAGGARD_TRACES_DIR; google2011-usage:DIR for others)",
)
@click.option("--trace", "spec", required=True, metavar="FORMAT:PATH", help="e.g. google2011-usage:DIR")
@click.option(
    "--methods",
    default=DEFAULT_METHODS,
    show_default=True,
    help=f"comma list of: {method_choices()} ('perfect' is always added as a yardstick)",
)
@click.option(
    "--spares",
    default="unlimited,0",
    show_default=True,
    metavar="LIST",
    help="scheduler settings: 'unlimited' (Algorithm 2) and/or spare machine counts (Algorithm 3)",
)
@click.option("--repeats", type=click.IntRange(1, 1000), default=5, show_default=True, help="seeded draws per setting")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the relaunch duration draws")
@click.option(
    "--threshold",
    type=click.Choice(["oracle", "online"]),
    default="oracle",
    show_default=True,
    help="tau for the methods that use one: the job's true p90 (as laggard eval) or the online estimate",
)
@click.option(
    "--mode",
    type=click.Choice(list(MODES)),
    default="relaunch",
    show_default=True,
    help="relaunch: terminate the flagged task (Nurd's Algorithms 2 and 3); speculate: keep it beside the copy",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1),
    default=None,
    help="Nurd calibration alpha in [0, 1] [default: setting LAGGARD_NURD_ALPHA]",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON document on stdout instead of tables")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="write a plot of the mean JCT cut (.png, .svg or .pdf)")
def simulate_(spec: str, methods: str, spares: str, repeats: int, seed: int, threshold: str, mode: Mode,
              alpha: float | None, as_json: bool, plot: str | None) -> None:  # fmt: skip
    names = parse_methods(",".join(n for n in methods.split(",") if n.strip() != PERFECT))
    spares_settings = parse_spares(spares)
    check_plot_dir(plot)
    context = prediction_context(alpha)
    err = Console(stderr=True)
    jobs, trace = load_jobs(spec, err)
    require_checkpoints(jobs, spec, hint=". What honouring the blacklist would save is in laggard run's report.")
    with err.status(f"{', '.join(names)} on {len(jobs)} job(s)"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's convergence chatter on tiny refits
        results = simulate_jobs(jobs, names, context, spares_settings, repeats, seed, threshold == "online", mode)
    rows: list[dict[str, Any]] = []
    for job_id, job_rows in results.items():
        if isinstance(job_rows, str):
            err.print(f"job {job_id}: {job_rows}, skipped")
            continue
        rows += job_rows
        _say_best(err, job_id, job_rows)
    if not rows:
        raise UserError(f"no job with finished tasks in {spec}")
    summary = summarise(rows)
    threshold_text = "oracle p90 of each job, as laggard eval" if threshold == "oracle" else "online p90 estimate"
    if plot:
        plot_reductions(summary, plot, f"{mode} mode, {threshold} threshold, {len(jobs)} job(s) of {spec}")
        err.print(f"wrote {plot}")
    if as_json:
        document = {
            "trace": spec, "mode": mode, "model": f"{MODES[mode]}; {MODEL}", "threshold": threshold_text,
            "perfect": PERFECT_NOTE, "repeats": repeats, "seed": seed, "alpha": context.params["nurd_alpha"],
            "bad_rows": trace.bad_rows, "jobs": rows, "summary": summary,
        }  # fmt: skip
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        print_tables(stdout_console(), rows, summary, threshold_text, mode)


def _say_best(err: Console, job_id: str, job_rows: list[dict[str, Any]]) -> None:
    """One progress line per job: the method that cut its completion time most."""
    best = max((r for r in job_rows if r["method"] != PERFECT), key=lambda r: r["reduction"], default=None)
    if best is not None:
        setting = spares_label(best["spares"])
        change = "shorter" if best["reduction"] >= 0 else "longer"
        err.print(
            f"job {job_id}: JCT {best['jct_base_s']:.0f} s without mitigation; the best method, {best['method']} "
            f"({setting}), makes it {best['jct_s']:.0f} s ({percent(abs(best['reduction']))} {change})",
            soft_wrap=True,
        )
