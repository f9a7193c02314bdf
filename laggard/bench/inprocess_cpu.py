"""The in-process statistics path's CPU seconds, for comparing two trees side by side (A B B A) on a shared machine.

``laggard bench`` reports the statistics path in events per wall second; under load from other processes that
moves by a third between runs. This reads the events into memory first (as the bench does), then feeds them to
``LocalPipeline`` (``inprocess.statistics_path``) ``--rounds`` times and prints one JSON line per round: events,
CPU seconds, events per CPU second, and the samples, rankings and deltas (equal across trees when the outputs are).

    python -m laggard.bench.inprocess_cpu [N] [--trace SPEC] [--rounds R]

(N: the first N events, default all; SPEC: default the Google 2011 task events under the traces folder.)
"""

from __future__ import annotations

import sys
import time

import orjson

from laggard.bench import inprocess
from laggard.bench.common import google_events_spec
from streams.settings import Settings


def measure(spec: str, limit: int | None, rounds: int) -> list[dict[str, float | int]]:
    """One record per round: CPU seconds of the statistics path over the same events in memory."""
    settings = Settings()
    events, _ = inprocess.read_events(spec, limit)
    results = []
    for _ in range(rounds):
        cpu = time.process_time()
        counts = inprocess.statistics_path(settings, events)
        seconds = time.process_time() - cpu
        results.append({"events": len(events), "cpu_s": seconds, "per_cpu_s": len(events) / seconds,
                        **{key: counts[key] for key in ("samples", "rankings", "deltas")}})
    return results


def main(argv: list[str]) -> None:
    limit = int(argv[0]) if argv and argv[0].isdigit() else None
    spec = argv[argv.index("--trace") + 1] if "--trace" in argv else google_events_spec(Settings())
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 1
    for result in measure(spec, limit, rounds):
        sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
