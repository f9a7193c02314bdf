"""``laggard eval --heldout``: choose each method's configuration, and the default, on held-out jobs only.

The logic is ``streams.core.evaluation.selection``; this reads the traces, runs it with progress on stderr
and prints the leave-one-out table (or one JSON document).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from laggard.commands.options import stdout_console
from laggard.commands.prediction_options import load_jobs, require_checkpoints
from laggard.errors import UserError
from streams.core.evaluation.selection import ANY, CANDIDATES, Candidate, leave_one_out, score_candidates, summarise
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import expand_names

PROTOCOL = (
    "leave-one-out: for each group held out (a job; or a whole trace when several are given), each family picks "
    "the candidate with the best mean F1 in time on the other groups' jobs and is scored on the held-out group "
    "only; 'any' picks among every candidate of every family but the yardstick elapsed-tau; JCT change = 1 - job "
    "completion time when a scheduler relaunches the flagged tasks (laggard simulate's relaunch mode, unlimited "
    "machines) / without, mean over jobs (> 0: jobs end sooner)"
)


def candidates_for(names: Sequence[str] | None) -> list[Candidate]:
    """The candidates of the named families or methods (all of them for None)."""
    if names is None:
        return list(CANDIDATES)
    wanted = set(expand_names(names))
    chosen = [c for c in CANDIDATES if c.family in wanted]
    families = ", ".join(dict.fromkeys(c.family for c in CANDIDATES))
    known = {c.family for c in CANDIDATES}
    ignored = [name for name in names if not set(expand_names([name])) & known]
    if not chosen or ignored:  # "spark,foo" ran spark alone and said nothing of foo
        raise click.UsageError(f"--heldout compares these families only: {families}"
                               + (f" (not {', '.join(ignored)})" if ignored else ""))
    return chosen


def run_heldout(specs: Sequence[str], names: Sequence[str] | None, context: PredictionContext, online: bool,
                repeats: int, err: Console) -> dict[str, Any]:  # fmt: skip
    """The held-out document: candidates, per-group rows and per-family means."""
    candidates = candidates_for(names)
    traces: dict[str, dict[str, list[Event]]] = {}
    for spec in specs:
        jobs, _ = load_jobs(spec, err)
        require_checkpoints(jobs, spec)
        traces[spec] = jobs
    started = time.perf_counter()

    def progress(message: str) -> None:
        err.print(f"[{time.perf_counter() - started:5.0f} s] {message}", markup=False, soft_wrap=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's and River's chatter on tiny fits
        table = score_candidates(traces, candidates, context, online=online, repeats=repeats, progress=progress)
    keys = list(next(iter(table.values()), {}))
    if not keys:
        raise UserError("no job with finished tasks to score")
    by_trace = len(specs) > 1
    groups = {key: key.rsplit("/", 1)[0] if by_trace else key for key in keys}
    rows = leave_one_out(table, {c.label: c.family for c in candidates},
                         groups, frozenset(c.label for c in candidates if c.yardstick))  # fmt: skip
    return {
        "traces": list(specs), "protocol": PROTOCOL, "threshold": "online" if online else "oracle",
        "held_out": "trace" if by_trace else "job", "repeats": repeats,
        "candidates": [{"family": c.family, "label": c.label, "yardstick": c.yardstick} for c in candidates],
        "rows": [asdict(r) for r in rows], "summary": summarise(rows),
    }  # fmt: skip


def print_heldout(document: dict[str, Any]) -> None:
    out = stdout_console()
    out.print(f"Protocol: {document['protocol']}; threshold {document['threshold']}.", markup=False)
    families: dict[str, list[str]] = {}
    for c in document["candidates"]:
        families.setdefault(c["family"], []).append(c["label"])
    out.print("Candidates: " + "; ".join(f"{f}: {', '.join(labels)}" for f, labels in families.items()), markup=False)
    table = Table(title=f"held out by {document['held_out']}", title_justify="left")
    for column in ("held out", "family", "chosen on the others", "F1 in time", "F1 <50%", "F1 ever", "JCT change"):
        table.add_column(column, justify="right" if column.startswith(("F1", "JCT")) else "left", no_wrap=True)
    for r in document["rows"]:
        table.add_row(r["group"], r["family"], r["chosen"], f"{r['f1_in_time']:.2f}", f"{r['f1_at_50']:.2f}",
                      f"{r['f1']:.2f}", f"{100 * r['jct_change']:+.1f} %")  # fmt: skip
    out.print(table)
    summary = Table(title="mean over held-out groups", title_justify="left")
    for column in ("family", "F1 in time", "F1 <50%", "F1 ever (paper)", "JCT change"):
        summary.add_column(column, justify="left" if column == "family" else "right", no_wrap=True)
    for family, s in document["summary"].items():
        summary.add_row(family + (" (the selection itself)" if family == ANY else ""), f"{s['f1_in_time']:.2f}",
                        f"{s['f1_at_50']:.2f}", f"{s['f1']:.2f}", f"{100 * s['jct_change']:+.1f} %")  # fmt: skip
    out.print(summary)


def emit(document: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        print_heldout(document)
