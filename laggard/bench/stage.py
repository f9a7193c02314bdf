"""One stage of the bench in a process of its own: ``python -m laggard.bench.stage NAME < config.json``.

The configuration (sizes, working directory, bootstrap) comes as JSON on stdin; the stage's figures go to
stdout as one JSON document with the stage's own peak resident memory; progress goes to stderr. Exit code 2
with one line on stderr means a user mistake (e.g. a non-empty broker given with --bootstrap).
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from laggard.bench import floors, inprocess, kafka, nurd_cost, scale
from laggard.bench.common import Sizes, google_events_spec, google_usage_spec, say, self_peak_mb, sizes_from
from producers.registry import open_trace
from streams.settings import Settings

USER_MISTAKE = 2


def _floors(config: dict[str, Any], settings: Settings, sizes: Sizes) -> dict[str, Any]:
    google = list(itertools.islice(open_trace(google_events_spec(settings)), sizes.decode_records))
    say(f"decode floors: {len(google)} Google task/job events")
    result = {"google_events": floors.decode_floors(google, sizes.avro_reference_records, sizes.repeats)}
    usage = list(open_trace(google_usage_spec(settings)))
    say(f"decode floors: {len(usage)} usage-series events (mostly checkpoints with features)")
    result["usage_series"] = floors.decode_floors(usage, sizes.avro_reference_records, sizes.repeats)
    return result


def _inprocess(config: dict[str, Any], settings: Settings, sizes: Sizes) -> dict[str, Any]:
    what = "all" if sizes.inprocess_events is None else f"the first {sizes.inprocess_events}"
    say(f"in-process: reading {what} Google task events into memory")
    events, reading = inprocess.read_events(google_events_spec(settings), sizes.inprocess_events)
    say(f"in-process: statistics + ranking over {len(events)} events")
    statistics = {**reading, **inprocess.statistics_path(settings, events)}
    del events
    say("in-process: Nurd over the Google usage series")
    usage, reading = inprocess.read_events(google_usage_spec(settings))
    return {"statistics": statistics, "nurd": {**reading, **inprocess.nurd_path(settings, usage)}}


def _nurd_cost(config: dict[str, Any], settings: Settings, sizes: Sizes) -> dict[str, Any]:
    usage = list(open_trace(google_usage_spec(settings)))
    return nurd_cost.nurd_cost(usage, sizes.nurd_batch_jobs, inprocess.nurd_options(settings))


def _kafka(config: dict[str, Any], settings: Settings, sizes: Sizes) -> dict[str, Any]:
    say(f"kafka: reading the first {sizes.kafka_events} Google task events")
    events = list(itertools.islice(open_trace(google_events_spec(settings)), sizes.kafka_events))
    return kafka.kafka_stage(Path(config["workdir"]), settings, sizes, events, config.get("bootstrap"))


def _scale(config: dict[str, Any], settings: Settings, sizes: Sizes) -> dict[str, Any]:
    return scale.scale_stage(sizes.scale_nodes, sizes.scale_running_nodes)


STAGES: dict[str, Callable[[dict[str, Any], Settings, Sizes], dict[str, Any]]] = {
    "floors": _floors,
    "inprocess": _inprocess,
    "nurd_cost": _nurd_cost,
    "kafka": _kafka,
    "scale": _scale,
}


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # so that every `finally` runs and brokers and workers are stopped


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in STAGES:
        print(f"usage: python -m laggard.bench.stage {{{','.join(STAGES)}}} < config.json", file=sys.stderr)
        return USER_MISTAKE
    signal.signal(signal.SIGTERM, _terminate)
    config = orjson.loads(sys.stdin.buffer.read())
    try:
        figures = STAGES[argv[0]](config, Settings(), sizes_from(config["sizes"]))
    except kafka.BenchRefused as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return USER_MISTAKE
    except KeyboardInterrupt:  # SIGTERM from the bench (or Ctrl-C): every `finally` ran; the bench says so, once
        return 128 + signal.SIGTERM
    figures["peak_mb"] = self_peak_mb()
    sys.stdout.buffer.write(orjson.dumps(figures))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
