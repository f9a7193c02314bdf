"""JSON-ready dicts of a run's deltas, final ranking, counts and detection scores (for ``--json``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from laggard.report.progress import RunOutcome
from streams.core.evaluation.detection import DetectionScore
from streams.core.events import BlacklistDelta
from streams.core.ranking import Ranking


def delta_dict(delta: BlacklistDelta) -> dict[str, Any]:
    """A delta with every field, its entries' statistics and reasons included."""
    return dataclasses.asdict(delta)


def ranking_dict(ranking: Ranking | None) -> dict[str, Any]:
    """The window and every node in it (statistics null for a deny-listed node with no samples)."""
    if ranking is None:
        return {"window_start_us": None, "window_end_us": None, "policy": None, "cap": 0, "nodes": []}
    nodes = []
    for row in ranking.nodes:
        s = row.stats
        nodes.append(
            {
                "node_id": row.node_id,
                "n": s.n if s else 0,
                "mean": s.mean if s else None,
                "std": s.std if s else None,
                "ci_low": s.ci_low if s else None,
                "ci_high": s.ci_high if s else None,
                "level": row.level,
                "eligible": row.eligible,
                "blacklisted": row.blacklisted,
                "reason": row.reason,
            }
        )
    return {
        "window_start_us": ranking.window_start_us,
        "window_end_us": ranking.window_end_us,
        "policy": ranking.policy,
        "cap": ranking.cap,
        "nodes_seen": ranking.seen,  # what the cap is a fraction of (nodes judged beyond the window included)
        "nodes": nodes,
    }


def counts_dict(outcome: RunOutcome) -> dict[str, Any]:
    """What the reader and the pipeline saw, and how long it took."""
    trace, counts = outcome.trace, outcome.pipeline.counts
    return {
        "events": counts.events,
        "tasks": trace.tasks,
        "jobs": trace.jobs,
        "finished": dict(sorted(trace.finished.items())),
        "skipped": trace.skipped,
        "skip_reasons": dict(trace.stats.skip_reasons.most_common()),
        "bad_rows": trace.bad_rows,
        "bad_examples": trace.bad_examples,
        "invalid": dict(sorted(counts.invalid.items())),
        "samples": counts.samples,
        "late_samples": outcome.pipeline.rank_stage.ranker.late_samples,
        "late_events": outcome.pipeline.late_events,
        "rankings": counts.rankings,
        "deltas": counts.deltas,
        "seconds": round(outcome.seconds, 3),
    }


def detection_dict(score: DetectionScore) -> dict[str, Any]:
    return {
        "precision": score.precision,
        "recall": score.recall,
        "true_positives": score.true_positives,
        "false_positives": score.false_positives,
        "missed": score.missed,
        "onset_to_blacklist_s": score.onset_to_blacklist_s,
    }


def run_document(outcome: RunOutcome) -> dict[str, Any]:
    """The one document of ``laggard run --json``."""
    last = outcome.pipeline.last_ranking
    document: dict[str, Any] = {
        "trace": outcome.trace.spec,
        "deltas": [delta_dict(delta) for delta in outcome.deltas],
        "blacklist": sorted(outcome.pipeline.blacklist.node_ids),
        "ranking": ranking_dict(last.ranking if last else None),
        "counts": counts_dict(outcome),
    }
    if outcome.trace.ground_truth is not None:
        document["ground_truth"] = outcome.trace.ground_truth
    if outcome.detection is not None:
        document["detection"] = detection_dict(outcome.detection)
    document["forward_lift"] = dataclasses.asdict(outcome.lift.result())
    found, truth = outcome.avoidance()
    document["avoidance"] = {
        "blacklist": dataclasses.asdict(found),
        "true_slow_nodes": None if truth is None else dataclasses.asdict(truth),
    }
    return document
