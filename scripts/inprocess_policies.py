"""Events per CPU second of the in-process statistics + ranking path under each policy, beside the Avro codec's
decode floor in CPU time, all in one process (issue 18, session 26; docs/scale.md).

    PYTHONPATH=. python scripts/inprocess_policies.py [N]     (the first N Google 2011 task events, default 300 000)

Prints one JSON document: per round the codec floor and each policy's rate, and the best of each over the best floor.
"""

from __future__ import annotations

import sys
import time

import orjson

from laggard.bench import inprocess
from laggard.bench.common import google_events_spec
from streams.serde import codec
from streams.settings import Settings

POLICIES = ("noop", "pcores", "running")


def main(n: int, rounds: int = 2) -> dict[str, object]:
    events, _ = inprocess.read_events(google_events_spec(Settings()), n)
    encoded = [codec.encode(e) for e in events]
    rates: dict[str, list[float]] = {"codec_cpu": [], **{p: [] for p in POLICIES}}
    for _ in range(rounds):
        began = time.process_time()
        for data in encoded:
            codec.decode(data)
        rates["codec_cpu"].append(len(encoded) / (time.process_time() - began))
        for policy in POLICIES:
            began = time.process_time()
            inprocess.statistics_path(Settings(policy=policy), events)
            rates[policy].append(len(events) / (time.process_time() - began))
    best = max(rates["codec_cpu"])
    return {"events": len(events), **rates, "share_of_codec_floor": {p: max(rates[p]) / best for p in POLICIES}}


if __name__ == "__main__":
    sys.stdout.write(orjson.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300_000)).decode() + "\n")
