"""``laggard run``: the stream pipeline in-process on a trace, no broker (SPEC 1, issue 4).

The same stages the Kafka workers run (normalise per job, rank per period of event time) fed straight
from a trace reader. It prints the final ranking, every blacklist delta and the counts; ``--json`` prints
them as one document. On a synthetic trace it also scores detection against the injected slow nodes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

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
from laggard.report.progress import RunOutcome, run_with_progress, trace_time
from streams.core.decision.registry import floor_policies
from streams.core.prediction.fleet import PredictorFleet
from streams.local import LocalPipeline
from streams.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def ranking_options(func: F) -> F:
    """The statistics and blacklist options shared by ``run`` and ``demo``; unset means the setting."""
    positive = click.FloatRange(min=0, min_open=True)
    options = [
        policy_option,
        click.option(
            "--window",
            "window_size_s",
            type=positive,
            metavar="S",
            help="statistics window in seconds of event time [default: 3600]",
        ),
        click.option(
            "--period",
            "ranking_period_s",
            type=positive,
            metavar="S",
            help="ranking period (window step) in seconds [default: 300]",
        ),
        click.option(
            "--job-idle-timeout",
            "job_idle_timeout_s",
            type=positive,
            metavar="S",
            help="a job with no event for S seconds is final [default: 3600; 600 for formats without job ends]",
        ),
        click.option("--min-tasks", type=click.IntRange(min=1), help="samples a node needs [default: 5]"),
        click.option(
            "--significance-floor", type=FloorType(),
            help=f"policies {_names(floor_policies())}: ci_low must exceed it; 'none' disables [default: 0.25]"
        ),
        click.option(
            "--max-fraction",
            type=click.FloatRange(0, 1, min_open=True),
            help="most nodes blacklisted, fraction of nodes seen [default: 0.1]",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def make_pipeline(settings: Settings, partitions: int = 1, **kwargs: Any) -> LocalPipeline:
    try:
        return LocalPipeline(settings, partitions=partitions, **kwargs)
    except ValueError as exc:  # a combination RankingConfig refuses
        raise UserError(f"invalid settings: {exc}") from exc


# Formats whose traces may carry TaskCheckpoint events (the others' readers never make one); of those, a
# generated trace is looked at (its first PEEK_EVENTS) to see whether it does.
CHECKPOINT_FORMATS = frozenset({"google2011-usage", "synthetic", "scenario"})
PEEK_EVENTS = 20_000


def carries_checkpoints(trace: Any) -> bool:
    """Whether ``trace`` reports running tasks (TaskCheckpoint), which a predictor needs to flag anything."""
    if trace.format not in CHECKPOINT_FORMATS:
        return False
    if trace.format == "google2011-usage":
        return True
    from streams.core.events import TaskCheckpoint

    return any(isinstance(event, TaskCheckpoint) for event, _ in zip(trace, range(PEEK_EVENTS), strict=False))


def worker_predictors(settings: Settings, trace: Any, partitions: int) -> list[PredictorFleet]:
    """The worker's predictors (one per partition, as ``predict_stragglers`` runs them) when it would flag
    anything on ``trace``: a predictor is set (not ``off``) and the trace has checkpoints; else none."""
    if settings.prediction_method == "off" or not carries_checkpoints(trace):
        return []
    from streams.config import job_idle_timeout_us, prediction_context

    context, timeout_us = prediction_context(settings), job_idle_timeout_us(settings)
    try:
        return [PredictorFleet(settings.prediction_method, context, timeout_us) for _ in range(partitions)]
    except ValueError as exc:  # an unknown method name
        raise UserError(f"invalid setting LAGGARD_PREDICTION_METHOD: {exc}") from None


def predictions_dict(pipeline: LocalPipeline, method: str | None) -> dict[str, Any]:
    """What the worker's predictor flagged over the run (``method`` None: no predictor ran)."""
    flags = pipeline.flags
    return {"method": method, "flagged_tasks": len({(f.job_id, f.task_id, f.attempt) for f in flags}),
            "jobs": len({f.job_id for f in flags})}


SOURCE_IDLE_TIMEOUT_S = 600.0  # for traces with no job ends, unless the operator chose otherwise


def idle_timeout_for(trace: Any, settings: Settings) -> tuple[Settings, str | None]:
    """A shorter job idle timeout for a trace whose jobs never end explicitly, when nobody set one.

    With the default (= the window), such jobs become final only after their tasks left the window, and the
    run would rank nothing (see ``late_samples``).
    """
    if trace.has_job_ends or "job_idle_timeout_s" in settings.model_fields_set:
        return settings, None
    seconds = min(SOURCE_IDLE_TIMEOUT_S, settings.window_size_s / 6)
    if seconds >= settings.job_idle_timeout_s:
        return settings, None
    note = (f"{trace.no_job_ends}: a job is final after {seconds:g} s without an event "
            "(--job-idle-timeout to choose)")
    return settings.model_copy(update={"job_idle_timeout_s": seconds}), note


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def describe_settings(settings: Settings) -> str:
    floor = "none" if settings.significance_floor is None else f"{settings.significance_floor:g}"
    if settings.policy not in floor_policies():
        floor += f" (not read by {settings.policy})"
    return (
        f"policy {settings.policy}, window {settings.window_size_s:g} s, "
        f"period {settings.ranking_period_s:g} s, job idle timeout {settings.job_idle_timeout_s:g} s, "
        f"min tasks {settings.min_tasks}, significance floor {floor}, max fraction {settings.max_fraction:g}"
    )


@click.command("run", epilog=policies_epilog() + "\n\n" + formats_epilog())
@click.option(
    "--trace",
    "spec",
    required=True,
    metavar="FORMAT:PATH",
    help="trace to run, e.g. google2011-events:DIR, csv:FILE or synthetic:nodes=60,slow=3",
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="normalising partitions, as many as task-events has in the Kafka deployment to compare",
)
@ranking_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON document on stdout, nothing else")
def run(spec: str, partitions: int, as_json: bool, **ranking: Any) -> None:
    """Run the pipeline in-process on a trace (no broker) and show the ranking, deltas, counts and the
    blacklist's forward lift (how much more often tasks on listed nodes straggled).

    Settings (LAGGARD_WINDOW_SIZE_S, LAGGARD_ALLOW_LIST, ...) apply; options override them.
    Progress goes to stderr.
    """
    settings = settings_with(**ranking)
    trace = open_trace_or_fail(spec)
    settings, idle_note = idle_timeout_for(trace, settings)
    predictors = worker_predictors(settings, trace, partitions)
    method = settings.prediction_method if predictors else None
    pipeline = make_pipeline(settings, partitions, predictor=predictors or None)
    err = Console(stderr=True, soft_wrap=True)
    err.print(f"[bold]laggard run[/] {spec}: {describe_settings(settings)}, {partitions} partition(s)"
              + (f", predictor {method}" if method else ""))
    if idle_note:
        err.print(idle_note, highlight=False)
    if settings.policy == "mlna":  # a month of trace time before the first listing: say so before the run
        err.print(f"ML-NA lists nodes once a period of {settings.mlna_period} x {settings.mlna_sub_period_s:g} s of "
                  "trace time has closed (LAGGARD_MLNA_PERIOD, LAGGARD_MLNA_SUB_PERIOD_S to choose)", highlight=False)
    outcome = run_with_progress(trace, pipeline, err)
    refuse_unusable(spec, trace)
    if as_json:
        from laggard.report.documents import run_document

        document = run_document(outcome)
        document["predictions"] = predictions_dict(pipeline, method)
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS) + b"\n")
        sys.stdout.flush()
        return
    console = stdout_console()
    print_outcome(outcome, console)
    if method:
        found = predictions_dict(pipeline, method)
        console.print(f"Predictions ({method}, in process, with an immediate node view): "
                      f"{found['flagged_tasks']} tasks flagged in {found['jobs']} jobs", highlight=False)


def print_outcome(outcome: RunOutcome, console: Console) -> None:
    """Final ranking, every delta, counts and (synthetic traces) detection, as tables."""
    from laggard.report.documents import counts_dict
    from laggard.report.ranking_table import print_ranking
    from laggard.report.terminal import print_avoidance, print_counts, print_deltas, print_detection, print_lift

    last = outcome.pipeline.last_ranking
    if not outcome.pipeline.counts.samples:
        console.print(
            "No ranking: no task of this trace finished successfully on a node (a format with job events only, "
            "such as alibaba2017-tasks, names no node)."
            if outcome.pipeline.counts.events
            else "No ranking: the trace held no event."
        )
    elif last is None:
        console.print("No ranking: the trace held no event with a time.")
    else:
        ranking = last.ranking
        console.print(
            f"[bold]Final ranking[/], window {trace_time(max(0, ranking.window_start_us))} to "
            f"{trace_time(ranking.window_end_us)} of event time"
        )
        print_ranking(ranking, console)
    print_deltas(outcome.deltas, console)
    print_counts(counts_dict(outcome), console)
    if outcome.detection is not None:
        print_detection(outcome.detection, console)
    print_lift(outcome.lift.result(), console)
    print_avoidance(*outcome.avoidance(), console)
