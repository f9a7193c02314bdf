"""Every ranking of an in-process run, in full, as one file: to hold two trees' outputs equal byte for byte.

A change meant to make the ranking cheaper must not change a bit of what it publishes. This runs ``LocalPipeline`` on
a trace and writes, per ranking, its rows (statistics as float hex, level, verdict, reason), node scores, delta and
snapshot; then the deltas, the run's counts and the final ``RankStage`` snapshot. Run it from each tree and ``cmp``
the files (docs/scale.md, session 14):

    python -m laggard.bench.ranking_digest SPEC LIMIT OUT [POLICY] [PARTITIONS]
    PYTHONPATH=OTHER_TREE python -P laggard/bench/ranking_digest.py ...  # a tree without this module (-P: its
                                                                         # folder's kafka.py off the path)
"""

from __future__ import annotations

import hashlib
import itertools
import sys
from pathlib import Path
from typing import Any

import orjson

from producers.registry import open_trace
from streams.core.rank_stage import RankResult
from streams.local import LocalPipeline
from streams.settings import Settings


def _hex(x: float | None) -> str | None:
    return None if x is None else float(x).hex()


def ranking_line(result: RankResult) -> bytes:
    """One ranking, every float exact."""
    ranking = result.ranking
    rows = [(row.node_id, None if (s := row.stats) is None else (s.n, _hex(s.mean), _hex(s.std), _hex(s.ci_low),
                                                                  _hex(s.ci_high)),
             row.level, row.eligible, row.blacklisted, row.reason) for row in ranking.nodes]
    return orjson.dumps({"boundary": result.boundary_us, "start": ranking.window_start_us, "cap": ranking.cap,
                         "mean_count": _hex(ranking.mean_count), "rows": rows,
                         "scores": [repr(score) for score in ranking.node_scores()],
                         "delta": repr(result.delta), "snapshot": repr(result.snapshot)})


def digest(spec: str, limit: int, policy: str = "pcores", partitions: int = 1) -> bytes:
    lines: list[bytes] = []
    pipeline = LocalPipeline(Settings(policy=policy), partitions=partitions,
                             on_ranking=lambda result: lines.append(ranking_line(result)))
    deltas = [repr(delta) for delta in pipeline.run(itertools.islice(open_trace(spec), limit))]
    state: Any = pipeline.rank_stage.snapshot()
    return b"\n".join([*lines, orjson.dumps(deltas), orjson.dumps(repr(pipeline.counts)),
                       orjson.dumps(state, option=orjson.OPT_SORT_KEYS)]) + b"\n"


def main(argv: list[str]) -> None:
    spec, limit, out = argv[0], int(argv[1]), Path(argv[2])
    data = digest(spec, limit, argv[3] if len(argv) > 3 else "pcores", int(argv[4]) if len(argv) > 4 else 1)
    out.write_bytes(data)
    rankings = data.count(b'{"boundary"')
    sys.stdout.write(f"{out} {rankings} rankings sha256 {hashlib.sha256(data).hexdigest()[:16]}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
