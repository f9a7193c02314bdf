"""Drive the in-process pipeline over a trace with a live progress line on stderr.

The line shows events read, events per second, how far into the trace event time has got and the size
of the current blacklist; a person watching a long replay sees it is alive and what it has found so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from streams.core.evaluation.avoidance import AvoidSummary, Spans, compare_avoidance
from streams.core.evaluation.detection import DetectionScore
from streams.core.evaluation.lift import ForwardLift
from streams.core.events import BlacklistDelta
from streams.local import LocalPipeline, fewer_collections

US_PER_S = 1_000_000
UPDATE_EVERY = 5_000  # events between refreshes of the progress line (cheap either way)
LOG_EVERY_S = 30.0  # when stderr is not a terminal (a log file), a plain status line this often


@dataclass
class RunOutcome:
    """A finished run: the trace (with its reading counters), the pipeline, every delta, wall seconds, the
    forward lift of the blacklist and, when the trace knows its slow nodes, the detection score."""

    trace: Any
    pipeline: LocalPipeline
    deltas: list[BlacklistDelta] = field(default_factory=list)
    seconds: float = 0.0
    detection: DetectionScore | None = None
    lift: ForwardLift = field(default_factory=ForwardLift)
    _avoidance: tuple[AvoidSummary, AvoidSummary | None] | None = None

    def avoidance(self) -> tuple[AvoidSummary, AvoidSummary | None]:
        """What honouring the blacklist would have done to the jobs (``simulation.avoidance``), and the same
        for the true slow nodes listed from the fault onset when the trace knows them (a yardstick)."""
        if self._avoidance is None:
            lists: dict[str, Spans] = {"found": self.lift.spans_s()}
            if self.detection is not None and self.detection.slow_nodes:
                onset = self.detection.onset_us / US_PER_S
                lists["truth"] = {node: [(onset, math.inf)] for node in self.detection.slow_nodes}
            compared = compare_avoidance(self.lift.placements(), lists)  # both over the same jobs
            self._avoidance = (compared["found"], compared.get("truth"))
        return self._avoidance


def trace_time(ts_us: int) -> str:
    """Event time for people: seconds under an hour, else hours.

    >>> trace_time(4_500_000_000), trace_time(3_000_000_000), trace_time(30_000_000), trace_time(-1)
    ('1.25 h', '50 min', '30 s', '-')
    """
    if ts_us < 0:
        return "-"
    seconds = ts_us / US_PER_S
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def run_with_progress(
    trace: Any,
    pipeline: LocalPipeline,
    console: Console,
    label: str = "running",
    on_delta: Callable[[BlacklistDelta], None] | None = None,
) -> RunOutcome:
    """Feed every event of ``trace`` to ``pipeline``, then finish it; score it when the trace knows the truth."""
    outcome = RunOutcome(trace, pipeline)
    truth = getattr(trace, "ground_truth", None)
    if truth is not None:
        outcome.detection = DetectionScore(truth.get("slow_nodes", ()), int(truth.get("onset_us", 0)))
    started = time.perf_counter()
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.description}[/]"),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )

    def take(deltas: list[BlacklistDelta]) -> None:
        for delta in deltas:
            outcome.deltas.append(delta)
            outcome.lift.observe_delta(delta)
            if outcome.detection is not None:
                outcome.detection.update(delta)
            if on_delta is not None:
                on_delta(delta)

    # the run's collector thresholds, as LocalPipeline.run has them (a third of the CPU otherwise)
    with fewer_collections(), Progress(*columns, console=console, transient=False, refresh_per_second=5) as progress:
        task = progress.add_task(label, status="starting", total=None)

        logged = [started]

        def show() -> None:
            now = time.perf_counter()
            status = _status(pipeline, now - started)
            progress.update(task, status=status)
            if not console.is_terminal and now - logged[0] >= LOG_EVERY_S:
                logged[0] = now
                console.print(f"{label}: {status}")

        lift = outcome.lift
        for count, event in enumerate(trace, start=1):
            lift.observe(event)
            deltas = pipeline.feed(event)
            if deltas:
                take(deltas)
                show()
            elif count % UPDATE_EVERY == 0:
                show()
        take(pipeline.finish())
        outcome.seconds = time.perf_counter() - started
        show()
    return outcome


def _status(pipeline: LocalPipeline, elapsed: float) -> str:
    counts = pipeline.counts
    rate = counts.events / elapsed if elapsed > 0 else 0.0
    listed = len(pipeline.blacklist.node_ids)
    return (
        f"{counts.events:,} events, {rate:,.0f}/s, trace time {trace_time(counts.last_ts_us)}, "
        f"blacklist [bold]{listed}[/]"
    )
