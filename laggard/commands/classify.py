"""``laggard classify``: ML-NA on a trace (SPEC 6): cluster nodes per period, predict next period's weak nodes.

Per period: the chosen k with its Calinski-Harabasz score, cluster sizes and centres, the weak cluster; per
classifier, the accuracy, precision and recall of its next-period predictions (the paper's Table II) and its
accuracy per period (the paper's Fig. 6), against the automatic labels and, on a generated cluster, against the
truth. The forward check says whether the tasks of nodes predicted weak straggled more in the period they
were predicted for than the cluster's tasks did (the forward lift of SPEC 7, for the default classifier).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import click
import orjson

from laggard.commands.options import formats_epilog, refuse_unusable, stdout_console
from laggard.commands.traces import echo_bad_rows, open_trace_or_fail
from laggard.errors import UserError
from streams.core.detection.mlna.analysis import PERSISTENCE, Analysis, Truth, analyse
from streams.core.detection.mlna.classifiers import CLASSIFIERS
from streams.core.detection.mlna.features import PeriodBuilder
from streams.core.detection.mlna.scoring import Score
from streams.core.evaluation.lift import ForwardLift, LiftResult
from streams.core.events import BlacklistDelta, BlacklistEntry, RemovedEntry
from streams.core.zscore import JobNormalizer

# Chosen on drifting clusters of seeds 100-104 (never on the seeds a report shows): see the module
# docstring of streams/core/detection/mlna/classifiers.py for the measurement.
DEFAULT_CLASSIFIER = "forest"
DEFAULT_THRESHOLD = 0.4
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_NEVER_US = 2**62
GENERATED = ("synthetic", "drifting")


def parse_duration(text: str) -> int:
    """``"1h"``, ``"30m"``, ``"1d"``, ``"900s"`` or plain seconds -> microseconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise click.BadParameter(f"{text!r} is not a duration such as 1h, 30m, 1d or 900s", param_hint="--sub-period")
    return round(float(match.group(1)) * _UNITS[match.group(2) or "s"] * 1_000_000)


def expand_seeds(specs: tuple[str, ...], seeds: str | None) -> list[str]:
    """Each generated trace once per seed of ``--seeds`` (``1-5`` or ``1,2,7``); other traces unchanged."""
    if not seeds:
        return list(specs)
    try:
        values = [v for part in seeds.split(",") for v in _seed_range(part.strip())]
    except ValueError:
        message = f"{seeds!r} is not a list of seeds such as 1-5 or 1,2,7"
        raise click.BadParameter(message, param_hint="--seeds") from None
    out = []
    for spec in specs:
        name, _, rest = spec.partition(":")
        if name.strip() not in GENERATED:
            out.append(spec)
            continue
        keep = [item for item in rest.split(",") if item.strip() and not item.strip().startswith("seed=")]
        out.extend(f"{name}:{','.join([*keep, f'seed={seed}'])}" for seed in values)
    return out


def _seed_range(part: str) -> range:
    low, _, high = part.partition("-")
    seeds = range(int(low), int(high or low) + 1)
    if not seeds:  # "3-1" ran nothing and said nothing
        raise ValueError(part)
    return seeds


@dataclass
class TraceRun:
    """One trace's analysis, forward check and the facts the report needs."""

    spec: str
    analysis: Analysis
    lift: LiftResult | None
    samples: int
    tail_start_us: int | None  # start of the incomplete last period, if any (used by the forward check only)
    bad_rows: int = 0
    bad_examples: list[dict[str, Any]] = field(default_factory=list)  # the first few: file, line, reason


def read_samples(spec: str, sub_period_us: int, sub_periods: int) -> tuple[list[PeriodBuilder], ForwardLift,
                                                                           int, Any, int | None]:
    """Every finished task's z-value placed in its period (task finish time); complete periods first."""
    trace = open_trace_or_fail(spec)
    normalizer = JobNormalizer(job_idle_timeout_us=_NEVER_US)
    lift = ForwardLift()
    period_us = sub_period_us * sub_periods
    builders: dict[int, PeriodBuilder] = {}
    samples, last_us = 0, -1
    for event in trace:
        lift.observe(event)
        last_us = max(last_us, event.ts_us)
        for sample in normalizer.update(event):
            samples += _place(builders, sample.node_id, sample.ts_us, sample.z, sub_period_us, sub_periods)
    for sample in normalizer.flush():
        samples += _place(builders, sample.node_id, sample.ts_us, sample.z, sub_period_us, sub_periods)
    refuse_unusable(spec, trace)
    if not builders and not trace.tasks:  # alibaba2017-tasks: 67 k Terminated tasks, none of them on a node
        raise UserError(f"no task of {spec} ran on a node (a format with job events only, such as alibaba2017-tasks, "
                        "names no node)")
    if not builders:
        raise UserError(f"no finished task with a z-value in {spec} (jobs need 2 successful tasks)")
    # A period is complete when the trace reaches into its last sub-period (a generated trace stops a little
    # before its last instant); an incomplete tail is left to the forward check of the last prediction.
    reached = {i for i in builders if (i + 1) * period_us - sub_period_us <= last_us}
    complete = [builders[i] for i in sorted(reached)]
    last = max(builders)
    tail = None if last in reached else last * period_us
    return complete, lift, samples, trace, tail


def _place(builders: dict[int, PeriodBuilder], node: str, ts_us: int, z: float, sub_us: int, subs: int) -> int:
    index = ts_us // (sub_us * subs)
    builder = builders.get(index)
    if builder is None:
        builder = builders[index] = PeriodBuilder(index * sub_us * subs, sub_us, subs)
    return int(builder.add(node, ts_us, z))


def truth_of(trace: Any) -> Truth | None:
    """From a generated cluster's ground truth: weak for more than half of the period."""
    spans = (trace.ground_truth or {}).get("weak_spans")
    if spans is None:
        return None

    def weak(node: str, start_us: int, end_us: int) -> bool:
        covered = sum(max(0, min(end_us, s[1]) - max(start_us, s[0])) for s in spans.get(node, ()))
        return covered > (end_us - start_us) / 2

    return weak


def forward_check(analysis: Analysis, lift: ForwardLift, method: str, period_us: int) -> LiftResult | None:
    """Blacklist each period's predicted weak nodes for the period after it; the lift of that list."""
    listed: frozenset[str] = frozenset()
    version = 0
    for period in analysis.periods:
        predicted = period.predicted[method]
        start = period.end_us
        added = tuple(BlacklistEntry(n, 0, 0, 0.0, 0.0, None, None, "predicted weak")
                      for n in sorted(predicted - listed))  # fmt: skip
        removed = tuple(RemovedEntry(n, "not predicted weak") for n in sorted(listed - predicted))
        if added or removed:
            version += 1
            lift.observe_delta(BlacklistDelta("mlna", version, start, "mlna", period.start_us, start, added, removed))
        listed = predicted
    return lift.result() if version else None


def run_one(spec: str, sub_period_us: int, sub_periods: int, methods: tuple[str, ...], seed: int,
            threshold: float, default: str) -> TraceRun:
    click.echo(f"reading {spec} ...", err=True)
    builders, lift, samples, trace, tail = read_samples(spec, sub_period_us, sub_periods)
    click.echo(f"  {samples:,} z-values in {len(builders)} complete periods; clustering and classifying ...", err=True)
    echo_bad_rows(trace)
    if not builders:
        click.echo(f"note: {spec} spans less than one period ({sub_periods} x {_duration(sub_period_us)}), so "
                   f"nothing is clustered; give shorter periods, e.g. --sub-period 1h --period N (N hours)", err=True)
    tables = [b.table() for b in builders]
    analysis = analyse(tables, methods, seed=seed, threshold=threshold, truth=truth_of(trace))
    return TraceRun(spec, analysis, forward_check(analysis, lift, default, sub_period_us * sub_periods), samples, tail,
                    trace.bad_rows, trace.bad_examples)


def _duration(us: int) -> str:
    """Microseconds as ``--sub-period`` takes them: ``1d``, ``1h``, ``30m`` or ``90s``."""
    seconds = us / 1_000_000
    unit = next((u for u in "dhm" if seconds % _UNITS[u] == 0), "s")
    return f"{seconds / _UNITS[unit]:g}{unit}"


# --- the report ------------------------------------------------------------------------------------


def _rates(s: Score) -> dict[str, Any]:
    return {"accuracy": s.accuracy, "precision": s.precision, "recall": s.recall,
            "tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn}  # fmt: skip


def trace_document(run: TraceRun) -> dict[str, Any]:
    analysis = run.analysis
    periods = []
    for p in analysis.periods:
        choice, subs = p.outcome.choice, p.outcome.table.sub_periods
        entry: dict[str, Any] = {
            "index": p.outcome.index, "start_us": p.start_us, "end_us": p.end_us,
            "nodes": len(p.outcome.table.nodes), "k": p.k,
            "ch_score": None if choice is None else choice.chosen.score,
            "ch_scores": {} if choice is None else {str(k): v for k, v in choice.scores.items()},
            "rule_met": None if choice is None else choice.rule_met,
            "sizes": [] if choice is None else list(choice.sizes),
            "weak_cluster": None if choice is None else choice.weak,
            "centres": [] if choice is None else [_centre(c, subs) for c in choice.chosen.centres],
            "weak_nodes": sorted(p.outcome.weak),
            "accuracy": {m: s.accuracy for m, s in p.labels.items()},
        }  # fmt: skip
        if p.truth:
            entry["accuracy_truth"] = {m: s.accuracy for m, s in p.truth.items()}
            entry["true_weak"] = len(p.true_weak or ())
        if p.clustering is not None:
            entry["clustering_vs_truth"] = _rates(p.clustering)
        periods.append(entry)
    document: dict[str, Any] = {
        "trace": run.spec, "samples": run.samples, "bad_rows": run.bad_rows, "bad_examples": run.bad_examples,
        "periods": periods,
        "table": {m: _rates(analysis.total(m)) for m in analysis.methods},
    }  # fmt: skip
    if any(p.truth for p in analysis.periods):
        document["table_truth"] = {m: _rates(analysis.total(m, "truth")) for m in analysis.methods}
    document["forward_check"] = None if run.lift is None else _lift(run.lift)
    return document


def _centre(centre: Iterable[float], sub_periods: int) -> dict[str, float]:
    """The whole period's summary of a centre: the last sub-period's cumulative mean z, std z and count."""
    values = list(centre)[3 * (sub_periods - 1):]
    # a centre's std is a mean of stds: below 0 only by rounding (printed "-0.00")
    return {"mean_z": values[0], "std_z": max(values[1], 0.0), "count": values[2]}


def _lift(result: LiftResult) -> dict[str, Any]:
    return {"lift": result.lift, "lift_low": result.lift_low, "lift_high": result.lift_high,
            "landed_tasks": result.landed, "landed_stragglers": result.landed_stragglers,
            "tasks": result.tasks, "cluster_rate": result.cluster_rate, "landed_rate": result.landed_rate,
            "nodes_listed": result.nodes}  # fmt: skip


def average(documents: list[dict[str, Any]], key: str, methods: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Mean over traces of each method's pooled rates (a trace where a rate is undefined is left out)."""
    out: dict[str, dict[str, Any]] = {}
    for method in methods:
        rows = [d[key][method] for d in documents if key in d]
        out[method] = {}
        for rate in ("accuracy", "precision", "recall"):
            values = [r[rate] for r in rows if r[rate] is not None]
            out[method][rate] = sum(values) / len(values) if values else None
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def print_report(document: dict[str, Any]) -> None:
    from rich.table import Table

    console = stdout_console()
    for trace in document["traces"]:
        console.print(f"[bold]{trace['trace']}[/]: {trace['samples']:,} z-values, {len(trace['periods'])} periods")
        if not trace["periods"]:
            continue  # nothing clustered or predicted (the note above says why): no empty tables
        periods = Table("period", "nodes", "k", "CH", "sizes", "weak (mean z, std z)", "accuracy per classifier")
        for p in trace["periods"]:
            weak = p["weak_cluster"]
            centre = p["centres"][weak] if weak is not None else None
            where = "-" if centre is None else f"#{weak + 1} ({centre['mean_z']:+.2f}, {centre['std_z']:.2f})"
            accuracy = " ".join(f"{m} {_pct(a)}" for m, a in p["accuracy"].items())
            periods.add_row(str(p["index"]), str(p["nodes"]), str(p["k"] or "-"),
                            "-" if p["ch_score"] is None else f"{p['ch_score']:.1f}",
                            "/".join(str(s) for s in p["sizes"]), where, accuracy)  # fmt: skip
        console.print(periods)
        _print_table(console, "next-period prediction vs the automatic labels (paper's Table II)", trace["table"])
        if "table_truth" in trace:
            _print_table(console, "next-period prediction vs the generator's truth", trace["table_truth"])
        lift = trace["forward_check"]
        if lift is not None and lift["lift"] is not None:
            console.print(f"forward check ({document['default_classifier']}): tasks on predicted weak nodes straggled "
                          f"{lift['lift']:.2f}x the cluster's rate ({lift['lift_low']:.2f}-{lift['lift_high']:.2f}, "
                          f"{lift['landed_tasks']:,} tasks on {lift['nodes_listed']} nodes)")
    if len(document["traces"]) > 1 and any(trace["periods"] for trace in document["traces"]):
        _print_table(console, f"mean over {len(document['traces'])} traces, vs the automatic labels",
                     document["mean"]["table"])
        if document["mean"].get("table_truth"):
            _print_table(console, "mean over the traces, vs the truth", document["mean"]["table_truth"])


def _print_table(console: Any, title: str, rows: dict[str, dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table("classifier", "precision", "recall", "accuracy", title=title)
    for method, rates in rows.items():
        table.add_row(method, _pct(rates["precision"]), _pct(rates["recall"]), _pct(rates["accuracy"]))
    console.print(table)


@click.command(epilog=formats_epilog())
@click.option("--trace", "traces", multiple=True, required=True, metavar="FORMAT:PATH",
              help="Trace to analyse; repeat to pool several (means are reported beside each).")
@click.option("--seeds", default=None, metavar="LIST",
              help="Run each generated trace (synthetic, drifting) once per seed, e.g. 1-5 or 1,2,7.")
@click.option("--sub-period", "sub_period", default="1d", show_default=True, metavar="DURATION",
              help="The paper's 'day': 1d, 1h, 30m, 900s ... (1h suits traces of hours).")
@click.option("--period", "sub_periods", type=click.IntRange(1), default=30, show_default=True,
              help="Sub-periods per period (the paper's 'month' of 30 days).")
@click.option("--classifiers", default=",".join(CLASSIFIERS.names()), show_default=True,
              help=f"Comma-separated; known: {', '.join(CLASSIFIERS.names())}.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=DEFAULT_THRESHOLD, show_default=True,
              help="A node is predicted weak when its probability reaches this.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of k-means and the classifiers.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write clusters-N.png and accuracy-N.png per trace into this directory.")
def classify(traces: tuple[str, ...], seeds: str | None, sub_period: str, sub_periods: int, classifiers: str,
             threshold: float, seed: int, as_json: bool, plot_dir: str | None) -> None:
    """Cluster nodes per period (ML-NA), label the weak cluster and predict next period's weak nodes."""
    sub_period_us = parse_duration(sub_period)
    methods = tuple(m.strip() for m in classifiers.split(",") if m.strip())
    if not methods:
        raise click.BadParameter(f"name at least one classifier; known: {', '.join(CLASSIFIERS.names())}",
                                 param_hint="--classifiers")
    for method in methods:
        if method not in CLASSIFIERS:
            raise click.BadParameter(f"unknown classifier {method!r}; known: {', '.join(CLASSIFIERS.names())}",
                                     param_hint="--classifiers")
    default = DEFAULT_CLASSIFIER if DEFAULT_CLASSIFIER in methods else methods[0]
    runs = [run_one(spec, sub_period_us, sub_periods, methods, seed, threshold, default)
            for spec in expand_seeds(traces, seeds)]  # fmt: skip
    documents = [trace_document(run) for run in runs]
    all_methods = (*methods, PERSISTENCE)
    document: dict[str, Any] = {
        "sub_period_us": sub_period_us, "sub_periods": sub_periods, "threshold": threshold,
        "default_classifier": default, "traces": documents,
        "mean": {"table": average(documents, "table", all_methods)},
    }  # fmt: skip
    if any("table_truth" in d for d in documents):
        document["mean"]["table_truth"] = average(documents, "table_truth", all_methods)
    if plot_dir is not None:
        from laggard.report.mlna_plots import write_plots

        document["plots"] = write_plots(runs, plot_dir)
    if as_json:
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print_report(document)
