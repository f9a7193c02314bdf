"""NodeRanker end to end: the 40-node acceptance, deltas and their versions, release, snapshot/restore."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from streams.core.events import NormalizedTask
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig
from streams.core.zscore import JobNormalizer

MIN = 60_000_000
PERIOD = 5 * MIN
SLOW = ("n03", "n17", "n29")


def stream(events, ranker: NodeRanker, normalizer: JobNormalizer | None = None) -> list:
    """Drive the ranker as the pipeline does: z-values as jobs become final, a decision every period."""
    normalizer = normalizer or JobNormalizer()
    deltas, next_decision = [], PERIOD
    for event in events:
        while event.ts_us >= next_decision:
            deltas.append(ranker.decide(next_decision))
            next_decision += PERIOD
        for sample in normalizer.update(event):
            ranker.update(sample)
    return [d for d in deltas if d is not None]


def whole_window(samples) -> NodeRanker:
    last = max(s.ts_us for s in samples)
    ranker = NodeRanker(RankingConfig(window_size_us=last + 1, period_us=1))
    for sample in samples:
        ranker.update(sample)
    return ranker


# --- acceptance ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_nodes_1_8x_slower_are_exactly_the_blacklist(ref, seed) -> None:
    samples = ref.normalize_all(ref.generate_cluster(nodes=40, slow=SLOW, slowdown=1.8, seed=seed))
    ranking = whole_window(samples).rank(max(s.ts_us for s in samples) + 1)
    assert len(ranking.ranked) == 40
    assert ranking.blacklist == frozenset(SLOW)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cluster_of_equal_nodes_blacklists_nothing(ref, seed) -> None:
    samples = ref.normalize_all(ref.generate_cluster(nodes=40, slow=(), seed=seed))
    ranking = whole_window(samples).rank(max(s.ts_us for s in samples) + 1)
    assert len(ranking.ranked) == 40 and ranking.blacklist == frozenset()


def test_streaming_with_the_default_window_finds_the_slow_nodes_and_nothing_else(ref) -> None:
    ranker = NodeRanker()
    deltas = stream(ref.generate_cluster(slow=SLOW, jobs=300, seed=4), ranker)
    assert ranker.blacklist.node_ids == frozenset(SLOW)
    assert all(not d.removed for d in deltas)
    assert [d.version for d in deltas] == list(range(1, len(deltas) + 1))
    assert ranker.blacklist.version == deltas[-1].version


# --- deltas -------------------------------------------------------------------------------------


def slow_node_samples(start_us: int, end_us: int, node: str = "slow", z: float = 1.5) -> list[NormalizedTask]:
    """Twelve nodes' samples, one per node every minute; ``node`` runs ``z`` behind, the rest near 0."""
    out = []
    for i, ts in enumerate(range(start_us, end_us, MIN)):
        for k in range(12):
            name = node if k == 0 else f"ok{k}"
            base = z if k == 0 else -0.15 + 0.05 * (k % 3)
            out.append(NormalizedTask(f"j{ts}", name, 0, name, ts, 1, base + 0.1 * ((i + k) % 3 - 1)))
    return out


def test_a_delta_carries_the_statistics_and_reason_and_nothing_changes_without_change() -> None:
    ranker = NodeRanker()
    for sample in slow_node_samples(0, 30 * MIN):
        ranker.update(sample)
    ranking = ranker.rank(30 * MIN)
    delta = ranker.decide(30 * MIN)
    assert delta is not None and delta.version == 1 and delta.removed == ()
    (entry,) = delta.added
    stats = ranking.by_node()["slow"].stats
    assert (entry.node_id, entry.level, entry.n, entry.mean, entry.ci_low) == (
        "slow", 0, stats.n, stats.mean, stats.ci_low)
    assert "level 0" in entry.reason
    assert (delta.window_start_us, delta.window_end_us, delta.issued_at_us) == (-30 * MIN, 30 * MIN, 30 * MIN)
    assert ranker.decide(35 * MIN) is None
    snapshot = ranker.blacklist
    assert snapshot.version == 1 and snapshot.node_ids == {"slow"} and snapshot.nodes == delta.added


def test_a_node_keeps_its_place_until_its_samples_expire_then_leaves_for_no_recent_evidence() -> None:
    ranker = NodeRanker()
    samples = slow_node_samples(0, 30 * MIN)
    later = [s for s in slow_node_samples(30 * MIN, 200 * MIN) if s.node_id != "slow"]
    for sample in samples:
        ranker.update(sample)
    assert ranker.decide(30 * MIN).version == 1
    for sample in later:
        ranker.update(sample)
    for now in range(35 * MIN, 90 * MIN, PERIOD):  # "slow" reports nothing more, its samples age
        delta = ranker.decide(now)
        assert delta is None, (now, delta)
    release = ranker.decide(90 * MIN)  # window [30 min, 90 min): the last sample (29 min) has expired
    assert release is not None and release.version == 2 and release.added == ()
    assert [r.node_id for r in release.removed] == ["slow"]
    assert release.removed[0].reason.startswith("no recent evidence")
    assert ranker.blacklist.node_ids == frozenset() and ranker.blacklist.version == 2


def test_snapshot_and_restore_through_json_continue_with_the_same_deltas(ref) -> None:
    events = ref.generate_cluster(slow=SLOW, jobs=200, seed=5)
    cut = len(events) // 2
    whole = stream(events, NodeRanker())
    first_normalizer, first = JobNormalizer(), NodeRanker()
    before = stream(events[:cut], first, first_normalizer)
    state = json.loads(json.dumps({"ranker": first.snapshot(), "normalizer": first_normalizer.snapshot()}))
    second, second_normalizer = NodeRanker(), JobNormalizer()
    second.restore(state["ranker"])
    second_normalizer.restore(state["normalizer"])
    after = stream_from(events[cut:], second, second_normalizer, events[cut - 1].ts_us)
    assert before + after == whole
    with pytest.raises(ValueError, match="version"):
        second.restore({"version": 0})


def stream_from(events, ranker: NodeRanker, normalizer: JobNormalizer, last_ts: int) -> list:
    deltas, next_decision = [], (last_ts // PERIOD + 1) * PERIOD
    for event in events:
        while event.ts_us >= next_decision:
            deltas.append(ranker.decide(next_decision))
            next_decision += PERIOD
        for sample in normalizer.update(event):
            ranker.update(sample)
    return [d for d in deltas if d is not None]


def test_ranking_statistics_match_numpy_over_a_generated_cluster(ref) -> None:
    events = ref.generate_cluster(slow=SLOW, seed=6)
    samples = ref.normalize_all(events)
    expected_z = ref.z(events)
    assert {(s.job_id, s.task_id): s.z for s in samples} == expected_z  # exact
    by_node = defaultdict(list)
    for s in samples:
        by_node[s.node_id].append(s.z)
    expected = ref.node_stats(by_node)
    ranking = whole_window(samples).rank(max(s.ts_us for s in samples) + 1)
    for row in ranking.ranked:
        n, mean, std, low, high = expected[row.node_id]
        s = row.stats
        assert s.n == n and abs(s.mean - mean) < 1e-9 and abs(s.std - std) < 1e-9
        assert abs(s.ci_low - low) < 1e-9 and abs(s.ci_high - high) < 1e-9
    assert {r.node_id: r.level for r in ranking.ranked} == ref.levels(
        {r.node_id: (r.stats.ci_low, r.stats.ci_high) for r in ranking.ranked})


def test_every_ranking_equals_one_rebuilt_from_scratch_whatever_was_reused_from_earlier_periods(ref) -> None:
    """Rows, verdicts and reasons are reused from one period to the next; a ranker restored from a snapshot just
    before each period (nothing to reuse) must rank exactly alike, blacklist changes and releases included."""
    events = ref.generate_cluster(slow=SLOW, jobs=200, seed=11)
    normalizer, ranker, next_rank, compared = JobNormalizer(), NodeRanker(RankingConfig(min_dwell_periods=0)), PERIOD, 0
    for event in events:
        while event.ts_us >= next_rank:
            fresh = NodeRanker(RankingConfig(min_dwell_periods=0))
            fresh.restore(json.loads(json.dumps(ranker.snapshot())))
            kept, rebuilt = ranker.decide_ranking(next_rank), fresh.decide_ranking(next_rank)
            assert kept == rebuilt, next_rank
            compared += len(kept[0].nodes)
            next_rank += PERIOD
        for sample in normalizer.update(event):
            ranker.update(sample)
    assert compared > 0 and ranker.blacklist.node_ids == frozenset(SLOW)
