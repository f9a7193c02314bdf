"""`laggard replay`: a trace as task and job events, to Kafka, to stdout as JSON lines, or nowhere."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import orjson

from laggard.commands.options import PositiveFinite, bootstrap_option, formats_epilog, refuse_unusable, settings_with
from laggard.commands.traces import open_trace_or_fail
from laggard.errors import UserError
from producers.registry import Trace
from producers.sink import Interrupts, JsonLinesSink, KafkaSink, NullSink, Pacer, Sink
from producers.sink import replay as replay_events
from streams.errors import BrokerUnavailable


@click.command(epilog=formats_epilog())
@click.option(
    "--trace",
    "spec",
    required=True,
    metavar="FORMAT:PATH",
    help="The trace, e.g. google2011-events:DIR or synthetic:nodes=40,slow=3 (formats below).",
)
@bootstrap_option
@click.option(
    "--sink",
    "sink_name",
    type=click.Choice(["kafka", "stdout", "null"]),
    default="kafka",
    show_default=True,
    help="kafka publishes; stdout writes JSON lines; null only counts (timing).",
)
@click.option(
    "--speed",
    type=PositiveFinite(),
    default=None,
    metavar="X",
    help="Follow the trace's clock, X times faster [default: as fast as possible].",
)
@click.option(
    "--max-rate",
    type=PositiveFinite(),
    default=None,
    metavar="N",
    help="At most N events per second.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N", help="Stop after N events.")
@click.option("--json", "as_json", is_flag=True, help="Print one summary JSON document on stdout at the end.")
def replay(
    spec: str,
    bootstrap: str | None,
    sink_name: str,
    speed: float | None,
    max_rate: float | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Replay a trace as task events (topic task-events) and job events (job-events), keyed by job id.

    Events come in event-time order. Rows a reader cannot use are counted, and the first few are
    reported with file and line; the replay goes on. A progress line runs on stderr.
    """
    _check_options(bootstrap, sink_name, speed, max_rate, as_json)
    trace = open_trace_or_fail(spec)
    sink = _make_sink(sink_name, bootstrap)
    interrupts = Interrupts()  # SIGTERM (a replay Job deleted) ends it as Ctrl-C does
    main = threading.current_thread() is threading.main_thread()  # only the main thread may set a handler
    previous = [signal.signal(s, interrupts) for s in (signal.SIGINT, signal.SIGTERM)] if main else []
    try:
        with _quiet_kafka_clients():
            summary = _run(trace, sink, Pacer(speed, max_rate), limit, interrupts)
    except (BrokerUnavailable, KeyboardInterrupt):  # the broker stopped answering, or Ctrl-C while closing
        if not isinstance(sink, KafkaSink):
            raise
        sink.close()
        raise UserError(_lost(sink)) from None
    finally:
        for number, handler in zip((signal.SIGINT, signal.SIGTERM), previous, strict=False):
            if handler is not None:  # None: a handler set from C, which cannot be put back
                signal.signal(number, handler)
    summary["sink"] = sink_name
    if isinstance(sink, KafkaSink):
        summary["kafka"] = {"topics": [sink.task_topic, sink.job_topic], "acknowledged": sink.sent,
                            "failed": sink.failed, "first_error": sink.first_error}  # fmt: skip
    if as_json:
        click.echo(orjson.dumps(summary).decode())
    else:
        _print_summary(summary)
    if isinstance(sink, KafkaSink) and not trace.has_job_ends:
        click.echo(f"note: {trace.no_job_ends}: workers rank their jobs by provisional "
                   "z-values until the job idle timeout makes them final; with LAGGARD_WAIT_FOR_JOB_EVENTS=false "
                   "they also stop waiting for job-events at once instead of after LAGGARD_IDLE_STREAM_TIMEOUT_S",
                   err=True)
    if isinstance(sink, KafkaSink) and sink.failed:
        raise UserError(_lost(sink))
    if summary["interrupted"]:  # stopped by Ctrl-C or SIGTERM: what was sent is flushed, the rest never was
        click.echo(f"interrupted: {summary['events']:,} events sent, the rest of the trace not", err=True)
        raise SystemExit(128 + (interrupts.signal or signal.SIGINT))
    refuse_unusable(spec, trace)  # every row bad (a wrong format) or skipped: nothing was published, say so


def _lost(sink: KafkaSink) -> str:
    """One line for records the broker did not acknowledge (``close()`` counts every such record as failed)."""
    lost = f"{sink.failed:,} of {sink.records:,} events were not acknowledged"
    if sink.stalled:
        return f"the broker at {sink.bootstrap} stopped answering; {lost}"
    return f"{lost}: {sink.first_error or 'the replay stopped before they were (Ctrl-C)'}"


@contextmanager
def _quiet_kafka_clients() -> Iterator[None]:
    """aiokafka and kafka-python log every failed reconnect (tens of MB a minute of a dead broker); the sink
    reports a broker that stopped answering in one line instead."""
    loggers = [logging.getLogger(name) for name in ("aiokafka", "kafka")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _check_options(
    bootstrap: str | None, sink_name: str, speed: float | None, max_rate: float | None, as_json: bool
) -> None:
    if bootstrap and sink_name != "kafka":
        raise click.UsageError("--bootstrap is for the kafka sink; drop it or drop --sink")
    if speed is not None and max_rate is not None:
        raise click.UsageError("give --speed or --max-rate, not both")
    if as_json and sink_name == "stdout":
        raise click.UsageError("--json and --sink stdout both write to stdout; use one of them")


def _make_sink(name: str, bootstrap: str | None) -> Sink:
    if name == "null":
        return NullSink()
    if name == "stdout":
        return JsonLinesSink(sys.stdout)
    from streams import kafka_clients
    from streams.serde import topics

    settings = settings_with(bootstrap)
    try:
        kafka_clients.create_topics(settings, (topics.TASK_EVENTS, topics.JOB_EVENTS))
        problem = kafka_clients.copartitioning_problem(settings)
        if problem:
            raise UserError(problem)
        return KafkaSink(settings)
    except BrokerUnavailable as exc:
        raise UserError(str(exc)) from None


def _run(trace: Trace, sink: Sink, pacer: Pacer, limit: int | None, interrupts: Interrupts) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task(f"replaying {trace.format}", total=limit)

        def show(count: int, seconds: float) -> None:
            rate = count / max(seconds, 1e-9)
            progress.update(bar, completed=count, description=f"{count:,} events, {rate:,.0f}/s")

        result = replay_events(trace, sink, pacer, limit, show, interrupts=interrupts)
    if result.unsent is not None:  # read when Ctrl-C came, never handed to the sink: not in the summary's counts
        trace.uncount(result.unsent)
    summary = trace.summary()
    summary.update(seconds=round(result.seconds, 3), events_per_second=round(result.events_per_second, 1))
    summary["limit"] = limit
    summary["interrupted"] = result.interrupted
    return summary


def _print_summary(summary: dict[str, Any]) -> None:
    err = click.get_text_stream("stderr")
    jobs = f"{summary['jobs']:,} job{'' if summary['jobs'] == 1 else 's'}"
    click.echo(
        f"{summary['events']:,} events ({summary['tasks']:,} task starts, {jobs}) "
        f"in {summary['seconds']:.1f} s, {summary['events_per_second']:,.0f} events/s",
        file=err,
    )
    finished = ", ".join(f"{status} {count:,}" for status, count in summary["finished"].items())
    click.echo(f"finishes: {finished or 'none'}", file=err)
    reasons = "; ".join(f"{reason}: {count:,}" for reason, count in summary["skip_reasons"].items())
    click.echo(f"skipped: {summary['skipped']:,}" + (f" ({reasons})" if reasons else ""), file=err)
    click.echo(f"bad rows: {summary['bad_rows']:,}", file=err)
    for bad in summary["bad_examples"]:
        click.echo(f"  {bad['file']}:{bad['line']}: {bad['reason']}", file=err)
    if "ground_truth" in summary:
        truth = summary["ground_truth"]
        click.echo("ground truth: " + ", ".join(
            f"{key} {', '.join(map(str, value)) if isinstance(value, list) else value}" for key, value in truth.items()
        ), file=err)  # fmt: skip
    if "kafka" in summary:
        kafka = summary["kafka"]
        click.echo(f"kafka: {kafka['acknowledged']:,} acknowledged, {kafka['failed']:,} failed", file=err)
