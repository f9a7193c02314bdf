"""``laggard advise``: proactive straggler avoidance (SPEC 6, issue 17), after Yadwadkar and Choi.

A regression tree per task type predicts a task's z within its job from its node's status at entry; the
adviser avoids a node where the expected z exceeds a threshold, and says why with the tree's path.

\b
  laggard advise eval  --trace synthetic:...     threshold chosen on --tune-seeds, scored on --seeds
  laggard advise eval  --trace google2011-events:DIR --learn-hours 7
  laggard advise tree  --trace ... [--type T]    print a tree
  laggard advise query --trace ... --node N --type T   one advice, on the node's status at the trace's end
  laggard advise serve --trace ... --port 8088   the Kubernetes scheduler-extender endpoint
  laggard advise serve --trace ... --kafka --state FILE --metrics-port 9108   node status live from Kafka
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import orjson
from rich.table import Table

from adapters.base import write_atomically
from laggard.commands.advise_options import (
    budget_options,
    calibrated_option,
    calibration_options,
    checked_window,
    make_budget,
    parse_seeds,
    target_option,
    thresholds_text,
)
from laggard.commands.advise_runs import Knobs, evaluate_synthetic, evaluate_trace, load_samples
from laggard.commands.advise_serve import adviser_from, default_threshold, learned_trees, same_kind, serve
from laggard.commands.options import existing_directory, formats_epilog, stdout_console
from laggard.commands.prediction_options import check_plot_dir
from laggard.errors import UserError
from laggard.report.terminal import percent
from streams.core.avoidance.calibration import restore_budget
from streams.core.avoidance.thresholds import TARGETS


def _emit(document: dict[str, Any], as_json: bool) -> bool:
    if as_json:
        click.echo(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY).decode())
    return as_json


@click.group(epilog=formats_epilog())
def advise() -> None:
    """Avoid stragglers before they start: per-type regression trees on node status at task entry."""


@advise.command("eval", epilog=formats_epilog())
@click.option("--trace", "spec", required=True, help="FORMAT:PATH, or synthetic:KEYS (seed is set per run)")
@click.option("--seeds", default="1-5", show_default=True, help="synthetic: seeds reported")
@click.option("--tune-seeds", default="100-119", show_default=True, help="synthetic: seeds the threshold is chosen on")
@click.option("--learn-hours", type=click.FloatRange(min=0), default=None,
              help="hours that only teach the trees [default: 1 for synthetic, 7 otherwise]")
@click.option("--budget", type=click.FloatRange(0, 1), default=0.09, show_default=True,
              help="share of placements the threshold may refuse on the tuning data")
@click.option("--depth", type=click.IntRange(min=1), default=4, show_default=True, help="CART depth")
@click.option("--min-leaf", type=click.IntRange(min=1), default=50, show_default=True, help="CART leaf size")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, help="seeded redraws per job")
@click.option("--targets", default="p", show_default=True,
              help="synthetic: labels the trees may learn (p: straggler or not, so a leaf is a probability; z in "
                   "the job; ratio to the job's median), chosen on --tune-seeds")
@click.option("--rule", type=click.Choice(["passing", "worst"]), default="passing", show_default=True,
              help="per-type thresholds: meet the acceptance (refused <= --budget, half the stragglers avoided) on "
                   "the most tuning seeds, or lift the worst tuning seed's avoided share with --budget on every one")
@click.option("--one-threshold", is_flag=True, help="synthetic: one threshold for every task type")
@click.option("--refusal-budget", type=click.Choice(["auto", "on", "off", "ranked", "escalate", "calibrated"]),
              default=None,
              help="a running refusal budget (--budget-share of the last --budget-window placements) with lower "
                   "thresholds; ranked: refuse the worst of the recent predictions (safety and window chosen on "
                   "--tune-seeds) under the same cap; escalate: a threshold that climbs as the budget fills; "
                   "auto: the best on the worst tuning seed (traces: auto is off); calibrated: no threshold carried "
                   "over, refuse what ranks in the --top share of this cluster's recent requests, paid from a token "
                   "bucket earning --rate a request (--tune-seeds unused) [default: calibrated for synthetic, "
                   "off for traces]")
@budget_options
@calibration_options
@click.option("--json", "as_json", is_flag=True, help="one JSON document on stdout")
@click.option("--plot", type=click.Path(dir_okay=False), help="write a plot of the runs here (.png, .svg or .pdf)")
def eval_(spec: str, seeds: str, tune_seeds: str, learn_hours: float | None, budget: float, depth: int,
          min_leaf: int, repeats: int, targets: str, rule: str, one_threshold: bool, refusal_budget: str | None,
          budget_share: float, budget_window: str, top: float, least: float, rate: float, calibration_window: int,
          burst: float,
          as_json: bool, plot: str | None) -> None:  # fmt: skip
    """Stragglers avoided, placements refused and job time saved, against refusing as many at random."""
    synthetic = spec.startswith("synthetic:")
    refusal_budget = refusal_budget or ("calibrated" if synthetic else "off")
    hours = learn_hours if learn_hours is not None else (1.0 if synthetic else 7.0)
    chosen = tuple(t.strip() for t in targets.split(",") if t.strip())
    if not chosen or any(t not in TARGETS for t in chosen):
        raise click.BadParameter(f"name some of {', '.join(TARGETS)}, not {targets!r}", param_hint="--targets")
    knobs = Knobs(depth=depth, min_leaf=min_leaf, budget=budget, learn_hours=hours, repeats=repeats,
                  targets=chosen, per_type=not one_threshold, rule=rule, refusal_budget=refusal_budget,
                  budget_share=budget_share, budget_window=checked_window(budget_window, allow_off=False),
                  top=top, least=least, rate=rate, calibration_window=calibration_window, burst=burst)  # fmt: skip
    check_plot_dir(plot)
    if synthetic:
        document = evaluate_synthetic(spec, parse_seeds(seeds), parse_seeds(tune_seeds, "--tune-seeds"), knobs)
    else:
        document = evaluate_trace(spec, knobs)
    if plot:
        from laggard.report.avoidance_plot import plot_advice

        plot_advice(document, Path(plot))
    if not _emit(document, as_json):
        _print_eval(document)


def _print_eval(document: dict[str, Any]) -> None:
    console = stdout_console()
    label = {"z": "z", "ratio": "x job median", "p": "straggling probability"}[document.get("target", "z")]
    limits = thresholds_text(document["threshold"])
    budget = document.get("refusal_budget")
    if budget and budget["mode"] == "calibrated":
        budget = None
        limits = (f"{limits}, ranked in the top {document['refusal_budget']['top']:.0%} of the last "
                  f"{document['refusal_budget']['window']} requests")  # fmt: skip
    window = budget and (f"{budget['window']} placements" if budget["window"] else f"{budget['window_us'] / 1e6:g} s")
    running = f"; refused only while at most {budget['share']:.1%} of the last {window}" if budget else ""
    table = Table(title=f"adviser on {_what_ran(document)} (avoid above {label} {limits}{running})")
    for column in ("run", "refused", "stragglers avoided", "null avoided", "JCT cut", "null JCT cut", "JCT vs null",
                   "avoided (z>=1)", "meets 17"):  # fmt: skip
        table.add_column(column, justify="right")
    for r in document["runs"]:
        table.add_row(r["run"], percent(r["refused_share"]), percent(r["avoided_share"]),
                      percent(r["null_avoided_share"]), _pct(r["jct_reduction"]), _pct(r["null_jct_reduction"]),
                      _pct(r["jct_saved_vs_null"]), percent(r["avoided_share_z1"]),
                      "yes" if all(r["acceptance"].values()) else "no")  # fmt: skip
    console.print(table)
    errors = Table(title="tree error vs the job-mean baseline (scored hours/seeds; 100 % = no better)")
    for column in ("run", "model", "type", "n", "RAE %", "RRSE %", "corr"):
        errors.add_column(column, justify="right")
    for e in document["tree_errors"]:
        errors.add_row(e.get("run", ""), e["model"], e["task_type"], str(e["n"]), f"{e['rae']:.1f}",
                       f"{e['rrse']:.1f}", "-" if math.isnan(e["corr"]) else f"{e['corr']:.2f}")  # fmt: skip
    console.print(errors)
    if "summary" in document:
        console.print(_mean_text(document["summary"], len(document["runs"])), markup=False)
    if document.get("tree"):
        console.print(f"CART of type {document['tree']['task_type']!r} (learned on the first hours):")
        console.print(document["tree"]["text"], markup=False)


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else percent(value)


_CHECKS = {"avoided_at_least_half": "half the stragglers avoided", "refused_at_most_tenth": "at most a tenth refused",
           "jct_beats_null": "more job time saved than the null"}  # fmt: skip


def _mean_text(summary: dict[str, Any], runs: int) -> str:
    """``advise eval``'s ``summary`` in one line: the mean shares, and issue 17's acceptance."""
    missed = [words for check, words in _CHECKS.items() if not summary["acceptance_of_means"][check]]
    means = "the means meet 17" if not missed else f"the means miss: {', '.join(missed)}"
    return (f"mean over {runs} seed{'' if runs == 1 else 's'}: refused {_pct(summary['refused_share'])}, "
            f"stragglers avoided {_pct(summary['avoided_share'])} (null {_pct(summary['null_avoided_share'])}), "
            f"JCT cut {_pct(summary['jct_reduction'])} (null {_pct(summary['null_jct_reduction'])}); "
            f"{summary['runs_meeting_all']} of {runs} runs meet 17; {means}")


def _what_ran(document: dict[str, Any]) -> str:
    """The trace, or for a synthetic one its keys without the seed and the seeds that were run."""
    if "seeds" not in document:
        return str(document["trace"])
    head, _, rest = str(document["trace"]).partition(":")
    keys = ",".join(k for k in rest.split(",") if k.strip() and not k.strip().startswith("seed="))
    seeds = document["seeds"]
    contiguous = len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1))
    listed = f"{seeds[0]}-{seeds[-1]}" if contiguous else ", ".join(str(seed) for seed in seeds)
    return f"{head}:{keys}, seed{'' if len(seeds) == 1 else 's'} {listed}"


@advise.command("tree", epilog=formats_epilog())
@click.option("--trace", "spec", required=True, help="FORMAT:PATH the trees learn from (the whole trace)")
@click.option("--type", "task_type", default=None, help="task type [default: every type]")
@click.option("--depth", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--min-leaf", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="one JSON document on stdout")
def tree(spec: str, task_type: str | None, depth: int, min_leaf: int, as_json: bool) -> None:
    """Print the CART of each task type (or one), learned on the whole trace."""
    cart = learned_trees(spec, load_samples(spec)[0], depth, min_leaf)  # a trace too short for any tree: one line
    kinds = [task_type] if task_type else cart.types()
    unknown = [k for k in kinds if k not in cart.trees]
    if unknown:
        raise click.BadParameter(f"no tree for task type {unknown[0]!r}; types with a tree: "
                                 f"{', '.join(cart.types()) or 'none'}", param_hint="--type")
    if not _emit({"trees": {k: cart.text(k) for k in kinds}}, as_json):
        for kind in kinds:
            click.echo(f"# task type {kind}\n{cart.text(kind)}")


@advise.command("query", epilog=formats_epilog())
@click.option("--trace", "spec", required=True, help="FORMAT:PATH: trees and node status come from it")
@click.option("--node", required=True, help="the node asked about")
@click.option("--type", "task_type", default=None,
              help="the task's type [default: the trace's one type; a trace of several needs it]")
@click.option("--threshold", default=None,
              help="avoid above this expected z (or chance, --target p); per type as TYPE=Z,... (e.g. eval's choice: "
                   "--target p --threshold compute=0.30,memory=0.41) [default: 1.0; 0 with --calibrated; --target p "
                   "needs one]")
@target_option
@click.option("--cpu", type=click.FloatRange(min=0), default=None, help="the task's CPU request (trace units)")
@click.option("--memory", type=click.FloatRange(min=0), default=None, help="the task's memory request (trace units)")
@click.option("--blacklist", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a file adapter's blacklist")
@budget_options
@calibrated_option
@click.option("--budget-state", type=click.Path(dir_okay=False, path_type=Path), callback=existing_directory,
              help="the refusal budget's window, read before (when it exists; its share and window win) and "
                   "written after this query, so a series of queries shares one budget")
@click.option("--json", "as_json", is_flag=True, help="one JSON document on stdout")
def query(spec: str, node: str, task_type: str | None, threshold: str | None, target: str, cpu: float | None,
          memory: float | None, blacklist: Path | None, budget_share: float, budget_window: str,
          budget_state: Path | None,
          as_json: bool, **calibration: Any) -> None:  # fmt: skip
    """One advice (one placement): allow or avoid NODE for a task of TYPE, on the node's status at the trace's
    end; a refusal the budget cannot pay for is an allowance that says so."""
    from adapters.extender import BlacklistFile

    calibrated = bool(calibration["calibrated"])  # make_budget takes the flag out of ``calibration``
    if calibrated and budget_state is None:  # a fresh calibration has no requests to rank among, no tokens
        raise click.UsageError("--calibrated ranks a request among the earlier ones and pays refusals with tokens they "
                               "earned: give --budget-state FILE to keep them between queries")
    threshold = default_threshold(threshold, target, calibrated)
    budget = make_budget(budget_share, budget_window, calibration)
    if budget_state is not None and budget_state.exists():
        try:
            budget = restore_budget(orjson.loads(budget_state.read_bytes()))
        except OSError as exc:
            raise UserError(f"cannot read --budget-state {budget_state}: {exc.strerror or exc}") from None
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise UserError(f"--budget-state {budget_state}: {exc}") from None
        same_kind(budget, calibrated, f"--budget-state {budget_state}")
    adviser, tracker, end_us, types = adviser_from(spec, 4, 50, threshold, target)
    if task_type is None:  # "all" answered "no tree yet: allowed" on every trace whose tasks have types
        if len(types) != 1:
            raise click.UsageError(f"{spec} has tasks of types {', '.join(types)}: give --type")
        task_type = types[0]
    adviser.listed, adviser.budget = BlacklistFile(blacklist)(), budget
    advice = adviser.place(node, task_type, tracker.status(node, end_us, task_type), cpu, memory)
    if node not in tracker.nodes():  # the tracker answers an idle node: say so, the verdict stands
        advice = replace(advice, reason=f"{advice.reason} (node {node} never seen in the trace: taken as idle)")
    if budget_state is not None and budget is not None:
        try:
            # atomically: a full disk mid-write left a truncated file the next query refused
            write_atomically(budget_state, orjson.dumps(budget.snapshot()).decode() + "\n")
        except OSError as exc:  # was "Error: Permission denied: PATH", after the trees were trained, no option named
            raise UserError(f"cannot write --budget-state {budget_state}: {exc.strerror or exc}; no advice given, as "
                            "the budget could not keep it") from None
    document = {"node": node, "task_type": task_type, "verdict": advice.verdict, "expected_z": advice.expected_z,
                "threshold": advice.threshold, "budget_spent": advice.budget_spent,
                "reason": advice.reason}  # fmt: skip
    if not _emit(document, as_json):
        click.echo(f"{advice.verdict} {node} for {task_type}: {advice.reason}")


advise.add_command(serve)
