"""What ``laggard eval`` and ``laggard simulate`` share: method names from the registry, the predictors'
context from the settings, and reading a trace into jobs."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from laggard.commands.options import settings_with
from laggard.commands.traces import open_trace_or_fail
from laggard.errors import UserError
from streams.core.events import Event, TaskCheckpoint
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import ALIASES, PREDICTORS, expand_names


def method_choices() -> str:
    """The names ``--methods`` accepts, for its help: every registered predictor and the aliases."""
    return ", ".join([*PREDICTORS.names(), *ALIASES])


def parse_methods(text: str) -> list[str]:
    """Registered method names from a comma list, ``spark`` expanding to both parameter sets."""
    given = [name for name in (raw.strip() for raw in text.split(",")) if name]
    for name in given:
        if name not in ALIASES and name not in PREDICTORS:
            raise click.UsageError(f"unknown method {name!r} in --methods: choose from {method_choices()}")
    names = expand_names(given)
    if not names:
        raise click.UsageError("--methods names no method")
    return names


def prediction_context(alpha: float | None, initial_fraction: float | None = None) -> PredictionContext:
    """The predictors' context: the settings, with the command line on top."""
    settings = settings_with()
    return PredictionContext(
        initial_fraction=settings.nurd_initial_fraction if initial_fraction is None else initial_fraction,
        params={"nurd_alpha": settings.nurd_alpha if alpha is None else alpha, "nurd_epsilon": settings.nurd_epsilon},
        seed=settings.seed,
    )


# Formats whose events never carry a checkpoint: refused before reading (all of Google's 979 k events took 8 s here
# before "has no task checkpoints"; a whole trace, far longer)
NO_CHECKPOINTS = ("google2011-events", "alibaba2018", "alibaba2017", "alibaba2017-tasks", "csv")


def load_jobs(spec: str, err: Console) -> tuple[dict[str, list[Event]], Any]:
    """The trace's events grouped by job, and the trace (for its counters)."""
    if spec.partition(":")[0].strip() in NO_CHECKPOINTS:
        require_checkpoints({}, spec)
    trace = open_trace_or_fail(spec)
    jobs: dict[str, list[Event]] = defaultdict(list)
    try:
        for event in trace:
            jobs[event.job_id].append(event)
    except (ValueError, OSError) as exc:
        raise UserError(f"reading {spec}: {exc}") from None
    err.print(f"read {trace.events} events of {len(jobs)} jobs ({trace.bad_rows} bad rows skipped)")
    if not jobs:  # before "has no task checkpoints", which would send a user of google2011-usage to itself
        raise UserError(f"no job found in {spec}")
    return dict(jobs), trace


def require_checkpoints(jobs: dict[str, list[Event]], spec: str, hint: str = "") -> None:
    """Methods flag running tasks at their checkpoints: a trace with none would score 0 everywhere."""
    if not any(isinstance(e, TaskCheckpoint) for events in jobs.values() for e in events):
        raise UserError(
            f"{spec} has no task checkpoints, so no method can flag a running task: use a trace with usage "
            f"series (google2011-usage:DIR){hint}"
        )


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_dir(plot: str | None) -> None:
    """Fail before the work, not after it, when the plot could not be written."""
    if plot and plot.endswith(("/", os.sep)):  # "--plot out/" wrote a PNG file named "out"
        example = f"{plot.rstrip('/' + os.sep)}/plot.png"
        raise click.UsageError(f"--plot {plot} names a directory: give a file name (e.g. {example})")
    if plot and Path(plot).suffix.lower() not in PLOT_SUFFIXES:  # "jct.svg" got PNG bytes; "jct.txt" too
        raise click.UsageError(f"--plot {plot}: give a file ending {', '.join(PLOT_SUFFIXES[:-1])} or "
                               f"{PLOT_SUFFIXES[-1]} (the suffix chooses the format)")
    if plot and not Path(plot).expanduser().resolve().parent.is_dir():
        raise click.UsageError(f"--plot {plot}: its directory does not exist (create it, or fix the path)")
