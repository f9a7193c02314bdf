"""``laggard scenarios``: blacklist quality on the project's fault scenarios (issue 21, SPEC 7).

Each scenario (``producers.scenario_suite``) runs for every seed in open loop (the scheduler ignores the
blacklist) and closed loop (it honours it: no new task on a listed node), and the table gives per scenario
and loop: precision, recall, time from fault onset to listing and from recovery to release (event time,
pooled over the seeds' faulty nodes), flaps, chance listings, the largest listed share, the most listings of
one node within an hour, and the job time change when the list is honoured (closed against open loop of
the same seed; the oracle avoids exactly the faulty nodes while they are slow).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from laggard.commands.options import policies_epilog, settings_with, stdout_console
from laggard.commands.run import ranking_options
from laggard.errors import INTERRUPTED, UserError
from streams.config import ranking_config
from streams.settings import Settings

CHOOSING_SEEDS = "100-104"  # seeds for choosing detectors and defaults; report on 1-5


def parse_seeds(text: str) -> list[int]:
    """``"1-5"`` or ``"1,3,7"`` -> seeds; ValueError for anything else.

    >>> parse_seeds("1-3"), parse_seeds("7, 9")
    ([1, 2, 3], [7, 9])
    """
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, dash, high = part.partition("-")
        seeds.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    if not seeds:
        raise ValueError("no seed")
    return seeds


@click.command("scenarios", epilog=policies_epilog())
@click.option("--seeds", default="1-5", show_default=True,
              help=f"seeds to run, e.g. 1-5 or 1,3 (choose settings on others, e.g. {CHOOSING_SEEDS})")
@click.option("--only", multiple=True, metavar="NAME", help="run only this scenario (repeatable)")
@click.option("--loop", "loop_names", type=click.Choice(["open", "closed", "canary", "both", "all"]), default="both",
              show_default=True, help="open: the scheduler ignores the list; closed: it honours it; canary: it "
              "honours it but lets a listed node take one task every 5 min (a way back); both: open and "
              "closed; all: the three")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="processes to use")
@click.option("--checkpoints", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="running tasks report their progress this many times per mean task duration (noisy, see "
              "producers/scenarios.py); 0: none, the suite's traces as reported")
@click.option("--list", "list_only", is_flag=True, help="list the scenarios and what each one is, then stop")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False, path_type=Path),
              help="write a timeline PNG per scenario (first seed) into this directory")
@ranking_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON document on stdout, nothing else")
def scenarios(seeds: str, only: tuple[str, ...], loop_names: str, workers: int, checkpoints: float, list_only: bool,
              plot_dir: Path | None, as_json: bool, **ranking: Any) -> None:
    """Run the fault scenarios through the pipeline and score the blacklist: how soon slow nodes are
    listed, how soon they are released, flaps, chance listings, the cap, and the job time when the
    scheduler honours the list. Settings and options apply as for `laggard run`. Progress goes to stderr.
    """
    from laggard.bench.scenarios import result_document, run_suite, summarise
    from producers.scenario_suite import SCENARIOS

    unknown = [name for name in only if name not in SCENARIOS]
    if unknown:
        raise UserError(f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIOS)}")
    if list_only:
        _print_list({name: SCENARIOS[name] for name in (only or SCENARIOS)}, as_json)
        return
    try:
        seed_list = parse_seeds(seeds)
    except ValueError:
        raise UserError(f"--seeds {seeds!r}: expected e.g. 1-5 or 1,3,7") from None
    settings = settings_with(**ranking)
    overrides = {k: v for k, v in ranking.items() if v is not None}
    if overrides.get("significance_floor") == "none":
        overrides["significance_floor"] = None
    _check_before_running(settings, plot_dir)
    chosen = [SCENARIOS[name].scaled(checkpoints=checkpoints) for name in (only or SCENARIOS)]
    loops = {"both": ["open", "closed"], "all": ["open", "closed", "canary"]}.get(loop_names, [loop_names])
    err = Console(stderr=True, soft_wrap=True)
    longest_s = max(scenario.hours for scenario in chosen) * 3600
    if settings.policy == "mlna" and settings.mlna_period * settings.mlna_sub_period_s > longest_s:
        err.print(f"note: ML-NA lists nodes once a period of {settings.mlna_period} x {settings.mlna_sub_period_s:g} s "
                  f"has closed, and these scenarios last at most {longest_s / 3600:g} h: it lists none "
                  "(LAGGARD_MLNA_PERIOD, LAGGARD_MLNA_SUB_PERIOD_S to choose)", highlight=False)
    err.print(f"[bold]laggard scenarios[/]: {len(chosen)} scenario(s) x {len(seed_list)} seed(s), "
              f"{'+'.join(loops)} loop, max fraction {settings.max_fraction:g}"
              + (f", {checkpoints:g} progress reports per mean task" if checkpoints else ""), highlight=False)
    try:
        results = run_suite(chosen, seed_list, loops, overrides, workers, lambda line: err.print(line, highlight=False))
    except KeyboardInterrupt:  # the runs in flight are stopped (run_suite); what finished is not a suite's table
        err.print("interrupted: no table, no plots written", highlight=False)
        raise SystemExit(INTERRUPTED) from None
    rows = summarise(results)
    if plot_dir is not None:
        from laggard.report.scenario_plots import plot_timelines

        written = plot_timelines(results, plot_dir)
        err.print(f"{len(written)} plot(s) in {plot_dir}", highlight=False)
    if as_json:
        document = {"seeds": seed_list, "loops": loops, "settings": overrides, "checkpoints": checkpoints, "rows": rows,
                    "runs": [result_document(r) for r in results]}
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS) + b"\n")
        return
    print_table(rows, stdout_console())


def _check_before_running(settings: Settings, plot_dir: Path | None) -> None:
    """What would end the command after every run refuses it now, in one line: a combination of settings the
    ranking refuses (each run would raise it), a plot directory that cannot be made (the results would be lost)."""
    try:
        ranking_config(settings)
    except ValueError as exc:
        raise UserError(f"invalid settings: {exc}") from None
    if plot_dir is not None:
        try:
            plot_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the plot directory {plot_dir}: {exc.strerror or exc}") from None


def _print_list(known: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.buffer.write(orjson.dumps({name: s.about for name, s in known.items()}) + b"\n")
        return
    width = max(map(len, known))  # names longer than a fixed column pushed their text out of line
    for name, scenario in known.items():
        click.echo(f"{name:{width}}  {scenario.about}")


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f}"


def _share(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1%}" if signed else f"{value:.0%}"


def _on_listed(row: dict[str, Any]) -> str:
    """Starts on nodes the scheduler's list held, '+N' those placed as the node was listed (not refusals ignored);
    in the closed loop any of the first is a scheduler that did not honour its list."""
    count, at_listing = row["starts_on_listed"], row["starts_at_listing"]
    text = str(count) + (f" +{at_listing}" if at_listing else "")
    return text + " VIOLATION" if count and row["loop"] == "closed" else text


def print_table(rows: list[dict[str, Any]], console: Console) -> None:
    """The scenario table: one line per scenario and loop; times in minutes of event time."""
    table = Table(title="Blacklist quality on fault scenarios (times in minutes of event time)")
    for column in ("scenario", "loop", "prec", "recall", "list med", "list max", "never", "late", "release med",
                   "release max", "flaps", "chance", "max share", "cycles/h", "on listed", "job time", "oracle"):
        # Two-word headers on two lines from the start: the table then fits 160 columns without rich cutting the
        # scenario names short to make room for headers it would have wrapped anyway.
        table.add_column(column.replace(" ", "\n"), justify="left" if column in ("scenario", "loop") else "right")
    for row in rows:
        table.add_row(
            row["scenario"], row["loop"], _share(row["precision"]), _share(row["recall"]),
            _minutes(row["onset_to_listing_median_s"]), _minutes(row["onset_to_listing_max_s"]),
            str(row["never_listed"]), str(row.get("listed_late", 0)), _minutes(row["recovery_to_release_median_s"]),
            _minutes(row["recovery_to_release_max_s"]) + (f"+{row['never_released']}" if row["never_released"] else ""),
            str(row["flaps"]), str(row["chance_listings"]),
            _share(row["largest_share"]) + (" OVER CAP" if row["cap_exceeded"] else ""),
            str(row["cycles_per_hour"]), _on_listed(row), _share(row["jct_change"], True),
            _share(row["oracle_jct_change"], True),
        )  # fmt: skip
    console.print(table)
    console.print("never: faulty nodes never listed while faulty; late: of those, listed only after their fault ended; "
                  "release max '+N': N faulty nodes were still listed at the end, left out of the release times; "
                  "flaps: releases while still slow; chance: listings of never-faulty nodes; cycles/h: most "
                  "listings of one node within an hour; on listed: tasks the scheduler placed on a node its list "
                  "held (open: the list ignored; canary: probation tasks; closed: 0, any is flagged as a violation), "
                  "'+N': N more placed in the instant their node was listed, before the delta reached the scheduler "
                  "(the round's own first start let the pipeline rank the boundary; not a violation); job time: "
                  "closed against open loop (oracle: the faulty nodes avoided while slow).", highlight=False)
