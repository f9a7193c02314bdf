"""One direct worker against two, alternating, on the same pre-loaded Google events and broker (issue 18).

``laggard bench`` measures each worker count once; on a shared 2-core machine one run's ratio moves by a third.
This pre-loads the first ``N`` Google task/job events once per scenario (as the bench's Kafka stage does, 2
partitions, fresh topics each time) and runs ``laggard.bench.kafka.scenario`` for each worker count given, in
order, printing one JSON line per scenario: the normalised and ranked rates as the bench computes them
(``ranked_per_s``, from the first progress mark to the last ranking, is the one its targets use), and the rate from
the workers' start to the last ranking (``overall_ranked_per_s``: start-up included).

    python -m laggard.bench.workers_ab [N] COUNT ... [--trace SPEC] [--skip K] [--partitions P]   e.g. 500000 1 2 1 2

``--trace`` replaces Google's events with another trace's first ``N`` (a dense synthetic cluster: few ranking
boundaries per event, as live); ``--skip`` starts after the trace's first ``K`` events (a slice apart from the
one reported, to choose a setting on); ``--partitions`` pre-loads ``P`` partitions (default 2; a deployment's
default is 4).
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from pathlib import Path

import orjson

from laggard.bench.broker import own_broker
from laggard.bench.common import google_events_spec
from laggard.bench.kafka import encoded, scenario
from producers.registry import open_trace
from streams.settings import Settings

KEYS = ("sustained_per_s", "ranked", "ranked_per_s", "ranked_per_s_basis", "ranked_sustained_per_s",
        "ranking_finished", "ranking_lag_s",
        "worker_cpu_percent", "restarts", "seconds_from_start", "startup_seconds")


USAGE = ("usage: python -m laggard.bench.workers_ab [N] COUNT ... [--trace SPEC] [--skip K] [--partitions P]   "
         "e.g. 500000 1 2 1 2")


def _option(argv: list[str], name: str, default: str) -> tuple[str, list[str]]:
    """The value of ``name`` in ``argv`` and the rest of it."""
    if name not in argv:
        return default, argv
    at = argv.index(name)
    if at + 1 >= len(argv):
        raise SystemExit(f"{name} needs a value\n{USAGE}")
    return argv[at + 1], argv[:at] + argv[at + 2:]


def main(argv: list[str]) -> None:
    spec, argv = _option(argv, "--trace", google_events_spec(Settings()))
    skip, argv = _option(argv, "--skip", "0")
    partitions, argv = _option(argv, "--partitions", "2")
    if not (skip.isdigit() and partitions.isdigit() and int(partitions) > 0):
        raise SystemExit(f"--skip needs a count and --partitions a positive count\n{USAGE}")
    n = int(argv[0]) if argv and argv[0].isdigit() else 500_000
    counts = argv[1:] if argv and argv[0].isdigit() else argv
    if not all(count.isdigit() and int(count) > 0 for count in counts):
        raise SystemExit(f"worker counts must be positive integers, not {' '.join(counts)!r}\n{USAGE}")
    try:
        events = list(itertools.islice(open_trace(spec), int(skip), int(skip) + n))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot read the trace {spec!r}: {exc}") from None
    records = encoded(events)
    with tempfile.TemporaryDirectory(prefix="laggard-workers-ab-") as workdir, own_broker(Path(workdir)) as broker:
        settings = Settings(bootstrap_servers=broker.bootstrap, topic_partitions=int(partitions))
        for index, count in enumerate(counts or ["1", "2"]):
            # the raw consume rate of the same records, once, before the first scenario
            result = scenario(Path(workdir), settings, events, records, int(count), 300, measure_consume=index == 0,
                              engine="direct")
            out = {key: result.get(key) for key in ("consume_per_s", *KEYS) if key in result}
            end = (result.get("seconds_from_start") or 0) + (result.get("ranking_lag_s") or 0)
            out["overall_ranked_per_s"] = result["ranked"] / end if result.get("ranking_finished") and end else None
            sys.stdout.write(orjson.dumps({"workers": count, **out}).decode() + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
