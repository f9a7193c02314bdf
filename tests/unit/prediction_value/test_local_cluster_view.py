"""The in-process runner hands each published ranking's node evidence to its predictor: a node-aware method
sees the slow nodes' window mean z and the blacklist while the trace runs, as a worker's would."""

from __future__ import annotations

from producers.registry import open_trace
from streams.core.events import TaskCheckpoint
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.local import LocalPipeline
from streams.settings import Settings

TRACE = "synthetic:nodes=40,slow=3,jobs=150,checkpoints=4,seed=1"


def test_a_listed_slow_nodes_evidence_reaches_the_node_aware_predictor_during_the_run() -> None:
    fleet = PredictorFleet("select", PredictionContext(), job_idle_timeout_us=2**62)
    hazard = fleet.predictor.members[-1]  # select's node-aware hazard reads the fleet's live view
    pipeline = LocalPipeline(Settings(), predictor=fleet)
    trace = open_trace(TRACE)
    seen: dict[str, float] = {}  # per slow node, the largest node_z hazard read at a checkpoint on it
    for event in trace:
        pipeline.feed(event)
        if isinstance(event, TaskCheckpoint) and event.node_id in trace.ground_truth["slow_nodes"]:
            z = hazard.evidence.features(event.node_id)["node_z"]
            seen[event.node_id] = max(seen.get(event.node_id, 0.0), z)
    pipeline.finish()
    listed = set(pipeline.blacklist.node_ids)
    assert listed and listed <= set(trace.ground_truth["slow_nodes"])
    assert all(hazard.evidence.features(node)["node_listed"] == 1.0 for node in listed)
    assert all(seen[node] > 1.0 for node in listed)  # a slow node's window mean z, read mid-run
    assert pipeline.flags and all(f.method == "select" for f in pipeline.flags)

