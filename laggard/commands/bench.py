"""``laggard bench``: speed and cost measured side by side with their floors (issue 8)."""

from __future__ import annotations

import signal
import sys
from typing import Any

import click
import orjson
from rich.console import Console

from laggard.bench.common import SIZES, missing_traces
from laggard.commands.options import settings_with
from laggard.errors import UserError


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the bench is so that every `finally` runs (stages, brokers and workers stopped), then
    reported as a termination (143), not as Ctrl-C (130)."""


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated


@click.command()
@click.option("--quick", is_flag=True, help="Small sizes for a CI smoke run (under 2 minutes).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document with every figure on stdout.")
@click.option("--bootstrap", metavar="HOST:PORT", default=None,
              help="use this Kafka broker, which must hold no topics [default: start one on free ports]")
@click.option("--size", type=click.Choice(sorted(SIZES)), default=None, hidden=True,
              help="Sizes by name (full, quick, tiny); tiny is for the unit test.")
def bench(quick: bool, as_json: bool, bootstrap: str | None, size: str | None) -> None:
    """Measure laggard beside its floors in one go: decode floors (orjson, the Avro codec, fastavro, avro),
    the in-process statistics + ranking and Nurd paths, Nurd's cost per checkpoint against nurd-batch, and
    `laggard worker` on Kafka (one worker, then two; raw produce/consume floors; finish-to-delta latency on a
    live synthetic cluster), with each stage's peak memory.

    Each stage runs in a subprocess of its own, one after another. The bench starts its own Kafka broker on
    free ports and stops it at the end; with --bootstrap it uses that broker instead, which must hold no
    topics (the bench deletes and recreates them). Traces come from LAGGARD_TRACES_DIR (default
    ../shared/traces). The full run takes about 20 minutes on 2 cores; progress goes to stderr.
    """
    settings = settings_with(bootstrap)
    missing = missing_traces(settings)
    if missing:
        raise UserError(f"trace folder {missing[0]} not found: set LAGGARD_TRACES_DIR to the shared traces")
    sizes = SIZES[size or ("quick" if quick else "full")]
    if bootstrap:
        from laggard.bench.kafka import BenchRefused, check_empty

        try:
            check_empty(settings)  # before minutes of other stages; a broker that does not answer is one line too
        except BenchRefused as exc:
            raise UserError(str(exc)) from None

    from laggard.bench.output import render
    from laggard.bench.runner import StageFailed, run_bench

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        document = run_bench(sizes, settings.bootstrap_servers if bootstrap else None)
    except StageFailed as exc:
        raise UserError(str(exc) if not exc.user_mistake else "the bench refused to run (see above)") from None
    except _Terminated:
        click.echo("terminated", err=True)
        sys.exit(128 + signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if as_json:
        click.echo(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY).decode())
    else:
        render(document, Console())
