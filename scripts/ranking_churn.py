"""How much of each ranking changes from one period to the next, and what the in-process target leaves per event
(issue 18, session 28; docs/scale.md).

    PYTHONPATH=. python scripts/ranking_churn.py [N]     (the first N Google 2011 task events, default 300 000)

For each policy, one run counts the ranked rows and the rows that differ from the same node's row a period before
(what ``node-scores`` publishes: a NodeScore only when it changed), then timed runs give events per CPU second. The
codec's decode floor is measured in the same process, as ``scripts/inprocess_policies.py`` does; the target is half
of it, so the budget per event is ``1 / (0.5 x floor)``. Prints one JSON document.
"""

from __future__ import annotations

import sys
import time

import orjson

from laggard.bench import inprocess
from laggard.bench.common import google_events_spec
from streams.core.events import Event
from streams.core.rank_stage import RankResult
from streams.core.ranking import NodeRank
from streams.local import LocalPipeline
from streams.serde import codec
from streams.settings import Settings

POLICIES = ("noop", "pcores", "running")


class Churn:
    """Rows ranked, and rows unlike the node's row of the ranking before."""

    def __init__(self) -> None:
        self.rankings = self.rows = self.changed = 0
        self._last: dict[str, NodeRank] = {}

    def __call__(self, result: RankResult) -> None:
        rows = {row.node_id: row for row in result.ranking.ranked}
        self.rankings += 1
        self.rows += len(rows)
        self.changed += sum(1 for node, row in rows.items() if self._last.get(node) != row)
        self._last = rows


def churn(policy: str, events: list[Event]) -> Churn:
    counted = Churn()
    for _ in LocalPipeline(Settings(policy=policy), on_ranking=counted).run(events):
        pass
    return counted


def cpu_rate(policy: str, events: list[Event], rounds: int) -> float:
    best = 0.0
    for _ in range(rounds):
        began = time.process_time()
        inprocess.statistics_path(Settings(policy=policy), events)
        best = max(best, len(events) / (time.process_time() - began))
    return best


def codec_floor(events: list[Event], rounds: int) -> float:
    encoded = [codec.encode(e) for e in events]
    best = 0.0
    for _ in range(rounds):
        began = time.process_time()
        for data in encoded:
            codec.decode(data)
        best = max(best, len(encoded) / (time.process_time() - began))
    return best


def main(n: int, rounds: int = 2) -> dict[str, object]:
    events, _ = inprocess.read_events(google_events_spec(Settings()), n)
    floor = codec_floor(events, rounds)
    budget_us = 1e6 / (0.5 * floor)
    out: dict[str, object] = {"events": len(events), "codec_floor_per_cpu_s": round(floor),
                              "target_per_cpu_s": round(0.5 * floor), "budget_us_per_event": round(budget_us, 2)}
    for policy in POLICIES:
        counted, rate = churn(policy, events), cpu_rate(policy, events, rounds)
        out[policy] = {"per_cpu_s": round(rate), "us_per_event": round(1e6 / rate, 2),
                       "share_of_floor": round(rate / floor, 3), "rankings": counted.rankings,
                       "rows_per_event": round(counted.rows / len(events), 2),
                       "changed_rows_per_event": round(counted.changed / len(events), 2)}
    return out


if __name__ == "__main__":
    sys.stdout.write(orjson.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300_000)).decode() + "\n")
