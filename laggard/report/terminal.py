"""Tables for a person at a terminal: every delta, the run's counts, and how detection went."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from laggard.report.progress import trace_time
from streams.core.evaluation.avoidance import AvoidSummary
from streams.core.evaluation.detection import DetectionScore
from streams.core.evaluation.lift import LiftResult
from streams.core.events import BlacklistDelta


def interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:+.3f}, {high:+.3f}]"


def print_deltas(deltas: list[BlacklistDelta], console: Console) -> None:
    """Each delta as a heading line, then one line per node added (statistics, reason) or removed (reason).

    Lines rather than a table: the reasons are sentences and must stay whole in a narrow terminal.
    """
    if not deltas:
        console.print("\n[bold]Deltas[/]: none (the blacklist never changed)")
        return
    console.print(f"\n[bold]Deltas[/] ({len(deltas)}):")
    for delta in deltas:
        console.print(
            f"[bold]v{delta.version}[/] at trace time {trace_time(delta.issued_at_us)} "
            f"(window {trace_time(max(0, delta.window_start_us))} to {trace_time(delta.window_end_us)})"
        )
        for entry in delta.added:
            console.print(f"  [red]+ {entry.node_id}[/]: {entry.reason}")  # the reason holds the statistics
        for removed in delta.removed:
            console.print(f"  [green]- {removed.node_id}[/]: {removed.reason}")


def print_counts(counts: dict[str, Any], console: Console) -> None:
    """The reading and pipeline counters of ``documents.counts_dict``."""
    table = Table(title="Counts", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for name in ("events", "tasks", "jobs", "skipped", "bad_rows", "late_events", "samples", "late_samples", "rankings",
                 "deltas"):
        table.add_row(name.replace("_", " "), f"{counts[name]:,}")
        if name == "skipped":
            for reason, number in counts.get("skip_reasons", {}).items():
                table.add_row(f"  {reason}", f"{number:,}")
    for status, number in counts["finished"].items():
        table.add_row(f"finished {status}", f"{number:,}")
    for reason, number in counts["invalid"].items():
        table.add_row(f"invalid: {reason}", f"{number:,}")
    table.add_row("seconds", f"{counts['seconds']:.2f}")
    console.print(table)
    for bad in counts["bad_examples"]:
        console.print(f"  bad row, {bad['file']} line {bad['line']}: {bad['reason']}")
    if counts["bad_rows"] > len(counts["bad_examples"]):
        console.print(f"  ... and {counts['bad_rows'] - len(counts['bad_examples']):,} more bad rows")
    if counts["late_events"] >= max(1, 0.01 * counts["events"]):
        console.print(
            f"[yellow]warning:[/] {counts['late_events']:,} events came for jobs already final (after the job's "
            "JobFinish or its idle timeout, or a job id used again, as by a second trace replayed after the first) "
            "and were not scored."
        )
    late, samples = counts["late_samples"], counts["samples"]
    if samples and late >= 0.1 * samples:
        console.print(
            f"[yellow]warning:[/] {late:,} of {samples:,} z-values reached the ranking after their task had left the "
            "window and were never ranked. Jobs with no JobFinish in the trace (CSV, Alibaba) are final only after "
            "the job idle timeout; keep it well below the window (--job-idle-timeout 600)."
        )


def fraction(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.0%}"


def print_detection(score: DetectionScore, console: Console) -> None:
    """Against the synthetic ground truth: which slow nodes were caught, how fast, and any false alarm."""
    table = Table(title="Detection against the injected slow nodes", title_justify="left")
    for name in ("slow node", "first blacklisted", "after onset"):
        table.add_column(name, justify="right" if name == "after onset" else "left")
    for node, delay in score.onset_to_blacklist_s.items():
        first = score.first_blacklisted_us(node)
        table.add_row(
            node, "[red]never[/]" if first is None else trace_time(first), "-" if delay is None else f"{delay:,.0f} s"
        )
    console.print(table)
    wrong = ", ".join(score.false_positives) or "none"
    console.print(f"precision {fraction(score.precision)}, recall {fraction(score.recall)}; false positives: {wrong}")


def print_lift(result: LiftResult, console: Console) -> None:
    """Did the tasks that landed on blacklisted nodes straggle more than the cluster's? (SPEC 7)"""
    if result.lift is None or result.cluster_rate is None or result.landed_rate is None:
        console.print("Forward lift: no task started on a node while it was blacklisted (nothing to measure).")
        return
    console.print(
        f"Forward lift [bold]{result.lift:.2f}[/] (95 % {result.lift_low:.2f}-{result.lift_high:.2f}): "
        f"{result.landed:,} tasks started on {result.nodes} blacklisted node(s) while listed, "
        f"{fraction(result.landed_rate)} of them stragglers (>= their job's p90) against "
        f"{fraction(result.cluster_rate)} of the {result.tasks:,} tasks started cluster-wide since the first "
        f"delta ({fraction(result.other_rate)} on the other nodes)."
    )


def percent(value: float | None) -> str:
    """A share as a percentage ('-' when undefined), never '-0.0 %'."""
    return "-" if value is None else f"{100 * value + 0.0:.1f} %"


def sooner(value: float | None) -> str:
    """A mean reduction of job time in words: '2.3 % sooner', '2.3 % later' (the list cost time), '-' undefined."""
    if value is None:
        return "-"
    return f"{percent(abs(value))} {'later' if value < 0 else 'sooner'}"


def print_avoidance(found: AvoidSummary, truth: AvoidSummary | None, console: Console) -> None:
    """What honouring the blacklist would have saved (SPEC 7's DSB scheduler, ``simulation.avoid_blacklist``)."""
    if not found.moved:
        why = (
            f"{found.unmovable:,} task(s) started on a listed node, but their jobs ran nowhere else to draw a "
            "duration from"
            if found.unmovable
            else "no task started on a listed node"
        )
        console.print(f"Honouring the blacklist would have moved no task: {why}.")
        return
    console.print(
        f"Had schedulers honoured the blacklist, {found.moved:,} tasks of {found.affected_jobs:,} jobs would have run "
        f"elsewhere, taking {found.moved_mean_s_after:,.0f} s instead of {found.moved_mean_s_before:,.0f} s on average "
        f"(durations drawn from each job's tasks on other nodes, {found.repeats} seeded draws, open loop"
        + (f"; {found.unmovable:,} more had nowhere else to go" if found.unmovable else "")
        + ")."
    )
    compared = f"Averaged over the {found.over_jobs:,} jobs " + ("either list touched" if truth else "it touched")
    console.print(
        f"{compared}, jobs would have ended [bold]{sooner(found.mean_reduction)}[/] with the blacklist, "
        f"{sooner(found.mean_baseline)} with as many random tasks moved instead"
        + (
            f", and {sooner(truth.mean_reduction)} had exactly the injected slow nodes been listed from the fault "
            f"onset ({truth.moved:,} tasks moved)."
            if truth is not None and truth.moved
            else "."
        )
    )
