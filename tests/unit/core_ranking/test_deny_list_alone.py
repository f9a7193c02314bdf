"""A deny-list is published before any task has finished, not with the first ranking that has data.

An operator who puts a node on the deny-list expects schedulers to avoid it at once. The ranking's first boundary
is dated by the data (the earliest summary, sample or observed task event), so on a quiet start, or under a policy
whose normalisers send nothing until a task finishes, the deny-list waited for the first finished task, and in a
stream where none ever finished it was never published.
"""

from __future__ import annotations

import json

from streams.core.events import NodeMoments, NodeSummary, Progress
from streams.core.publication import PublishedRanking
from streams.core.ranking_config import RankingConfig
from streams.core.stages import RankStage
from streams.local import LocalPipeline
from streams.settings import Settings

MIN = 60_000_000
PERIOD = 5 * MIN


def config(**overrides: object) -> RankingConfig:
    base: dict[str, object] = {"period_us": PERIOD, "min_tasks": 2, "significance_floor": None,
                               "max_fraction": 0.5, "deny_list": frozenset({"bad", "worse"})}
    return RankingConfig(**{**base, **overrides})  # type: ignore[arg-type]


def summary(partition: int, partitions: int, boundary: int, values: dict[str, tuple[int, float]]) -> NodeSummary:
    moments = tuple(NodeMoments(node, boundary - PERIOD, n, mean, 0.01) for node, (n, mean) in sorted(values.items()))
    return NodeSummary(partition, partitions, boundary, PERIOD, moments, ())


def test_marks_alone_publish_the_deny_list_once_at_the_boundary_every_partition_passed() -> None:
    stage = RankStage(config(), partitions=2)
    assert stage.progress(Progress(0, 2, 3 * PERIOD + 7)) == []  # partition 1 has not reported
    (result,) = stage.progress(Progress(1, 2, 2 * PERIOD + 9))
    assert result.boundary_us == 2 * PERIOD  # the last boundary both partitions passed
    assert result.delta is not None and result.delta.version == 1
    assert [(e.node_id, e.reason) for e in result.delta.added] == [("bad", "on the deny-list"),
                                                                    ("worse", "on the deny-list")]
    assert result.ranking.ranked == ()  # no statistics: nothing to rank yet
    assert result.snapshot.node_ids == {"bad", "worse"}
    assert stage.progress(Progress(1, 2, 6 * PERIOD)) == []  # once: no delta, no empty rankings after it


def test_the_first_ranking_with_data_follows_the_deny_list_and_lists_by_evidence() -> None:
    stage = RankStage(config(max_fraction=1.0), partitions=1)  # room for the slow node beside the deny-list
    (guard,) = stage.progress(Progress(0, 1, PERIOD + 1))
    # data from later boundaries: "slow" clearly behind four healthy nodes
    values = {"slow": (6, 2.0), **{f"n{i}": (6, 0.0 + 0.01 * i) for i in range(4)}}
    stage.add(summary(0, 1, 3 * PERIOD, values))
    results = stage.progress(Progress(0, 1, 3 * PERIOD + 1))
    assert [r.boundary_us for r in results] == [3 * PERIOD]  # the data's first boundary, after the guard's
    delta = results[0].delta
    assert delta is not None and delta.version == guard.snapshot.version + 1
    assert [e.node_id for e in delta.added] == ["slow"] and delta.removed == ()  # the deny-list stays
    assert results[0].snapshot.node_ids == {"bad", "worse", "slow"}


def test_with_data_before_the_first_mark_the_deny_list_comes_with_the_first_ranking_as_before() -> None:
    stage = RankStage(config(), partitions=1)
    stage.add(summary(0, 1, PERIOD, {"n1": (3, 0.1), "n2": (3, 0.2)}))
    (result,) = stage.progress(Progress(0, 1, PERIOD + 1))
    assert result.ranking.ranked != () and result.delta is not None
    assert {e.node_id for e in result.delta.added} == {"bad", "worse"}


def test_a_restart_after_the_deny_list_does_not_publish_it_again() -> None:
    stage = RankStage(config(), partitions=1)
    assert len(stage.progress(Progress(0, 1, 2 * PERIOD))) == 1
    restored = RankStage(config(), partitions=1)
    restored.restore(json.loads(json.dumps(stage.snapshot())))
    assert restored.progress(Progress(0, 1, 4 * PERIOD)) == []
    # a ranking that lost its state but adopted what consumers hold does not publish it again either
    fresh = PublishedRanking(RankStage(config(), partitions=1))
    assert fresh.resume(stage.ranker.blacklist, restored=False)
    assert fresh.take(Progress(0, 1, 4 * PERIOD)) == []


def test_a_ranking_that_adopted_other_nodes_keeps_them_when_it_adds_the_deny_list() -> None:
    before = RankStage(config(deny_list=frozenset({"kept"})), partitions=1)
    before.progress(Progress(0, 1, PERIOD))
    ranking = PublishedRanking(RankStage(config(), partitions=1))
    ranking.resume(before.ranker.blacklist, restored=False)
    (publication,) = ranking.take(Progress(0, 1, 2 * PERIOD))
    assert publication.delta is not None and publication.delta.version == 2
    assert publication.delta.removed == ()
    assert publication.snapshot is not None and publication.snapshot.node_ids == {"kept", "bad", "worse"}


def test_laggard_run_on_a_trace_where_no_task_finishes_publishes_the_deny_list() -> None:
    """The in-process runner on a source with starts only (a scheduler that never reports completions): before,
    no ranking ever happened and the deny-list was never published."""
    from streams.core.events import JobStart, TaskStart

    events: list[object] = [JobStart("j", 0, 40)]
    events += [TaskStart("j", f"t{i}", 0, f"n{i % 3}", i * MIN) for i in range(40)]
    pipeline = LocalPipeline(Settings(deny_list=["bad"]), partitions=2)
    deltas = list(pipeline.run(events))
    assert [[e.node_id for e in d.added] for d in deltas] == [["bad"]]
    assert pipeline.blacklist.node_ids == {"bad"}
