"""The canary loop's probation: a listed node is offered one task every 5 minutes, and an offer gives one task."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from laggard.bench.scenarios import CANARY_EVERY_S, _Scheduler
from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.core.events import TaskStart


def test_a_node_capped_at_one_task_takes_one_per_round_and_the_others_take_the_rest() -> None:
    # A busy cluster, so rounds have more tasks than nodes and an uncapped node would take several at once.
    scenario = SCENARIOS["cpu-2x"].scaled(nodes=10, hours=1.0, load=0.9)

    def cap_node_0(candidates: Sequence[str], now_us: int) -> dict[str, int | None]:
        return {node: 1 if node == "node-0" else None for node in candidates}

    capped = [e for e in ClusterSim(scenario, 1, cap_node_0) if isinstance(e, TaskStart)]
    uncapped = [e for e in ClusterSim(scenario, 1) if isinstance(e, TaskStart)]
    per_round = Counter(e.ts_us for e in capped if e.node_id == "node-0")
    assert per_round and max(per_round.values()) == 1
    assert max(Counter(e.ts_us for e in uncapped if e.node_id == "node-0").values()) > 1  # the cap did something
    assert len(capped) == len(uncapped)  # no task lost: the round's other tasks went to other nodes


def test_a_listed_node_on_probation_gets_one_task_every_five_minutes() -> None:
    # node-03 is listed from the start and never released (no pipeline here): it lives on its canaries alone.
    scenario = SCENARIOS["healthy-24h"].scaled(nodes=20, hours=2.0)
    scheduler = _Scheduler("canary")
    scheduler.listed.add("node-03")
    starts: list[int] = []
    for event in ClusterSim(scenario, 1, scheduler.placement):
        if isinstance(event, TaskStart):
            scheduler.started(event)
            if event.node_id == "node-03":
                starts.append(event.ts_us)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= CANARY_EVERY_S * 1e6  # never two tasks in one offer, nor an offer before its time
    # An offer stands until the random placement draws the node: fewer than 2 h / 5 min, but evidence keeps coming.
    assert len(starts) >= 5
    assert scheduler.tasks_per_offer() == {1: len(starts)} == {1: scheduler.on_listed}
