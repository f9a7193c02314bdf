"""The worker can run the node-aware predictors: a restart continues where it was."""

from __future__ import annotations

import json

import pytest

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet


@pytest.mark.parametrize(
    ("method", "params"),
    [("hazard", {}), ("hazard", {"node_features": 2}), ("supervised-node", {}), ("select", {}), ("node-slow", {}),
     ("spark-node", {})],
)  # fmt: skip
def test_a_restored_fleet_flags_what_the_live_one_flags(method: str, params: dict[str, float]) -> None:
    events: list[Event] = list(SyntheticCluster(SyntheticConfig(nodes=10, slow=1, jobs=8, tasks=(15, 15),
                                                                checkpoints=3, seed=2)))  # fmt: skip
    half = len(events) // 2
    live = PredictorFleet(method, PredictionContext(params=params))
    for event in events[:half]:
        live.step(event)
    copy = PredictorFleet(method, PredictionContext(params=params))
    copy.restore(json.loads(json.dumps(live.snapshot())))
    assert copy.cold_starts == 0
    rest = [[(f.task_id, f.ts_us) for e in events[half:] if (f := fleet.step(e))] for fleet in (live, copy)]
    assert rest[0] == rest[1]
    assert rest[0]  # the second half is flagged at all
