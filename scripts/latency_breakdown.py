"""Where each period's finish-to-output time goes in the bench's live latency scenario (docs/scale.md, session 10).

Runs ``laggard.bench.latency.live_latency`` once on a broker that is already running (its topics are deleted and
made afresh), prints the bench's summary, then one line per ranked boundary B from the broker's timestamps:
``wait_close_ms`` (from the first input stream passing B to the record that closed B, and which stream that was,
``closer_ts_gap_s`` of event time after B), ``close_to_score`` (the worker: closing record -> first node score of B),
``score_to_delta`` and the finish-to-output of B's earliest finish. Run it from the tree to measure (``python -m``
puts the working directory first on the path of the workers it starts).

    python scripts/latency_breakdown.py HOST:PORT [faust|direct] [RUNS]
"""

from __future__ import annotations

import bisect
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from laggard.bench import latency
from laggard.bench.broker import INPUT_TOPICS, fresh_topics
from laggard.bench.common import SIZES
from streams.config import SECOND_US
from streams.core.events import TaskFinish
from streams.serde import topics as registry
from streams.settings import Settings


def breakdown(settings: Settings) -> list[dict[str, Any]]:
    inputs: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    finishes: list[tuple[int, int]] = []
    for topic in INPUT_TOPICS:
        for partition, ms, record in latency.read_back(settings, topic):
            inputs[(topic, partition)].append((record.ts_us, ms))
            if isinstance(record, TaskFinish):
                finishes.append((record.ts_us, ms))
    finishes.sort()
    scores: dict[int, int] = {}
    for _, ms, score in latency.read_back(settings, registry.NODE_SCORES.name):
        scores[score.window_end_us] = min(ms, scores.get(score.window_end_us, ms))
    deltas = {d.window_end_us: ms for _, ms, d in latency.read_back(settings, registry.BLACKLIST_DELTAS.name)}
    period = round(settings.ranking_period_s * SECOND_US)
    times = [ts for ts, _ in finishes]
    rows = []
    for boundary in sorted(scores):
        firsts = {}
        for key, stream in inputs.items():
            index = bisect.bisect_left(stream, (boundary, -1))
            if index == len(stream):
                break
            firsts[key] = stream[index]
        low, high = bisect.bisect_left(times, boundary - period), bisect.bisect_left(times, boundary)
        if len(firsts) < len(inputs) or low == high:
            continue
        closer = max(firsts, key=lambda k: firsts[k][1])
        closed, reached = firsts[closer][1], min(ms for _, ms in firsts.values())
        earliest = min(ms for _, ms in finishes[low:high])
        delta = deltas.get(boundary)
        rows.append({"B_s": boundary // SECOND_US, "delta": delta is not None, "finishes": high - low,
                     "wait_close_ms": closed - reached, "closer": f"{closer[0]}:{closer[1]}",
                     "closer_ts_gap_s": (firsts[closer][0] - boundary) / SECOND_US,
                     "close_to_score": scores[boundary] - closed,
                     "score_to_delta": None if delta is None else delta - scores[boundary],
                     "finish_to_score_max": scores[boundary] - earliest,
                     "finish_to_delta_max": None if delta is None else delta - earliest})
    return rows


def main(argv: list[str]) -> None:
    bootstrap = argv[0]
    engine = argv[1] if len(argv) > 1 else "direct"
    for _ in range(int(argv[2]) if len(argv) > 2 else 1):
        settings = Settings().model_copy(update={"bootstrap_servers": bootstrap, "topic_partitions": 2})
        fresh_topics(settings, 2)
        result = latency.live_latency(Path(tempfile.mkdtemp(prefix="latency-")), settings, SIZES["full"], engine)
        print(json.dumps({key: result[key] for key in ("events", "rankings", "deltas", "delta", "ranking")}))
        for row in breakdown(settings):
            print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv[1:])
