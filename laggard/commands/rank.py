"""``laggard rank``: rank the nodes of a task file by P-Cores and show the blacklist (SPEC 3).

The whole file is one window: every task's z-value against its job's other successful tasks, every
node's statistics and interval, its P-Cores level, and the blacklist the policy would issue.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console

from laggard.commands.options import (
    FloorType,
    formats_epilog,
    policies_epilog,
    policy_option,
    refuse_unusable,
    settings_with,
    stdout_console,
)
from laggard.commands.traces import open_trace_or_fail
from laggard.errors import UserError
from laggard.report.ranking_table import print_ranking
from streams.core.events import Event
from streams.core.ranker import NodeRanker, watches_tasks
from streams.core.ranking import Ranking
from streams.core.ranking_config import RankingConfig
from streams.core.zscore import JobNormalizer

MAX_EXAMPLES = 5
RANK_DEFAULT_POLICY = "pcores"  # the file is one window: P-Cores' question (DSB Algorithm 3)
_NEVER_US = 2**62  # the whole input is one window: no job goes idle, no sample expires


@dataclass
class ReadReport:
    """What reading the input found: rows used, rows still running, bad rows with the first few."""

    rows: int = 0
    running: int = 0
    bad: int = 0
    examples: list[str] = field(default_factory=list)


# --- reading ------------------------------------------------------------------------------------


def trace_report(trace: Any) -> ReadReport:
    """The reading counters of an iterated ``Trace`` in this command's terms."""
    finished = sum(trace.finished.values())
    report = ReadReport(rows=finished, running=max(0, trace.tasks - finished), bad=trace.bad_rows)
    report.examples = [f"{bad['file']} line {bad['line']}: {bad['reason']}" for bad in trace.bad_examples]
    report.examples = report.examples[:MAX_EXAMPLES]
    return report


# --- ranking ------------------------------------------------------------------------------------


def rank_events(events: Iterable[Event], config: RankingConfig) -> tuple[Ranking, int]:
    """Rank every node over all ``events`` as one window; also return the number of z-values."""
    normalizer = JobNormalizer(job_idle_timeout_us=_NEVER_US)
    samples = [sample for event in events for sample in normalizer.update(event)]
    samples += normalizer.flush()
    if not samples:
        return Ranking(0, 0, config.policy, (), 0), 0
    first = min(s.ts_us for s in samples)
    last = max(s.ts_us for s in samples)
    whole = replace(config, window_size_us=last - first + 1, period_us=1)
    ranker = NodeRanker(whole)
    for sample in samples:
        ranker.update(sample)
    return ranker.rank(last + 1), len(samples)


# --- output -------------------------------------------------------------------------------------


def ranking_document(ranking: Ranking) -> dict[str, Any]:
    """The ``--json`` document: the policy that ranked, every ranked node and the blacklist."""
    nodes = [
        {"node_id": row.node_id, "n": s.n, "mean": s.mean, "std": s.std, "ci_low": s.ci_low,
         "ci_high": s.ci_high, "level": row.level}
        for row in ranking.nodes
        if (s := row.stats) is not None
    ]
    return {"policy": ranking.policy, "nodes": nodes, "blacklist": sorted(ranking.blacklist)}


def _report_reading(report: ReadReport, source: str, samples: int, err: Console) -> None:
    err.print(f"{source}: {report.rows} finished attempts, {report.running} still running, "
              f"{report.bad} bad rows; {samples} z-values")
    for line in bad_row_lines(report):
        err.print(line)


def bad_row_lines(report: ReadReport) -> list[str]:
    """The first bad rows with file, line and reason, then how many more there were."""
    lines = [f"  bad row, {example}" for example in report.examples]
    if report.bad > len(report.examples):
        lines.append(f"  ... and {report.bad - len(report.examples):,} more bad rows")
    return lines


# --- the command --------------------------------------------------------------------------------


@click.command("rank", epilog=policies_epilog() + "\n\n" + formats_epilog())
@click.option("--tasks", "tasks", type=click.Path(path_type=Path), metavar="FILE.csv",
              help="task table with a header: job_id,task_id,node_id,start_us,end_us,status "
                   "(the replayers' csv: format; may be .gz)")
@click.option("--trace", "trace", metavar="FORMAT:PATH",
              help="rank straight from a trace in any format the replayers read")
@policy_option(default=RANK_DEFAULT_POLICY)
@click.option("--min-tasks", type=click.IntRange(min=1), default=None,
              help="samples a node needs to be eligible [default: 5]")
@click.option("--significance-floor", type=FloorType(), default=None,
              help="ci_low must exceed it; 'none' disables [default: 0.25]")
@click.option("--max-fraction", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="most nodes blacklisted, as a fraction of nodes seen [default: 0.1]")
@click.option("--seed", type=int, default=None, help="seed of the top-k boundary draw [default: 0]")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document: nodes and blacklist")
def rank(tasks: Path | None, trace: str | None, policy: str | None, min_tasks: int | None,
         significance_floor: float | str | None, max_fraction: float | None, seed: int | None,
         as_json: bool) -> None:
    """Rank the nodes of a task file by P-Cores and show the blacklist.

    The whole file is one window. Settings (LAGGARD_MIN_TASKS, LAGGARD_ALLOW_LIST, LAGGARD_DENY_LIST,
    ...) apply; options override them.
    """
    if (tasks is None) == (trace is None):
        raise click.UsageError("give exactly one of --tasks FILE.csv or --trace FORMAT:PATH")
    config = _config(policy, min_tasks, significance_floor, max_fraction, seed)
    err = Console(stderr=True, soft_wrap=True)  # log lines stay whole for grep
    started = time.perf_counter()
    # --tasks is the csv: format of the replayers (one reader for both); a Trace streams its events in
    # event-time order.
    source = open_trace_or_fail(f"csv:{tasks}" if tasks is not None else str(trace))
    ranking, samples = rank_events(source, config)
    refuse_unusable(f"csv:{tasks}" if tasks is not None else str(trace), source)
    report = trace_report(source)
    _report_reading(report, str(tasks or trace), samples, err)
    err.print(f"ranked {len(ranking.ranked)} nodes, blacklisted {len(ranking.blacklist)} "
              f"in {time.perf_counter() - started:.2f} s")
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(ranking_document(ranking)) + b"\n")
        sys.stdout.flush()
    else:
        print_ranking(ranking, stdout_console(), *_why_empty(source))


def _why_empty(source: Any) -> tuple[str, ...]:
    """Why an empty ranking is empty when the generic reason would mislead: events, but no task finished on a node
    (a format of job events only names none). A trace of no event was refused before (``refuse_unusable``)."""
    if not source.tasks:
        return ("nothing to rank: no task of this trace ran on a node (a format with job events only, such as "
                "alibaba2017-tasks, names no node)",)
    if not sum(source.finished.values()):
        return (f"nothing to rank: {source.tasks:,} task(s) started on nodes, none finished",)
    return ()


def _config(policy: str | None, min_tasks: int | None, floor: float | str | None,
            max_fraction: float | None, seed: int | None) -> RankingConfig:
    given: dict[str, Any] = {
        "policy": policy, "min_tasks": min_tasks, "max_fraction": max_fraction, "seed": seed,
    }
    settings = settings_with(None, **given)
    # One window of z-values is P-Cores' question (DSB); the product's default, the running policy, needs the task
    # events over time, which this command does not replay. A policy set by option or setting is taken as given.
    chosen_policy = settings.policy if "policy" in settings.model_fields_set else RANK_DEFAULT_POLICY
    if watches_tasks(RankingConfig(policy=chosen_policy)):
        raise UserError(f"policy {chosen_policy} judges task events over time, not one window of z-values: use "
                        f"`laggard run --trace ... --policy {chosen_policy}`, or rank with --policy pcores")
    chosen_floor = settings.significance_floor
    if floor is not None:
        chosen_floor = None if floor == "none" else float(floor)
    try:
        return RankingConfig(
            policy=chosen_policy, min_tasks=settings.min_tasks, significance_floor=chosen_floor,
            max_fraction=settings.max_fraction, min_dwell_periods=settings.min_dwell_periods,
            allow_list=frozenset(settings.allow_list), deny_list=frozenset(settings.deny_list),
            seed=settings.seed, cluster_id=settings.cluster_id,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from exc
