"""Scoring a run against the faulty nodes' spans: the figures the issue asks for, each able to fail."""

from __future__ import annotations

from streams.core.evaluation.detection import Span
from streams.core.evaluation.scenarios import score_run

H = 3_600_000_000
M = 60_000_000


def test_a_node_listed_at_its_onset_and_released_after_recovery() -> None:
    score = score_run({"a": [(H, 3 * H)]}, [Span("a", H + 5 * M, 3 * H + 10 * M)], nodes=20, end_us=5 * H,
                      max_fraction=0.1)
    assert (score.precision, score.recall) == (1.0, 1.0)
    assert score.onset_to_listing_s == [300.0] and score.recovery_to_release_s == [600.0]
    assert (score.flaps, score.chance_listings, score.cycles_per_hour) == (0, 0, 1)


def test_release_while_still_slow_is_a_flap_and_still_listed_at_the_end_is_never_released() -> None:
    stays = [Span("a", H, 2 * H), Span("a", 2 * H + 30 * M, None)]
    score = score_run({"a": [(H, 3 * H)]}, stays, nodes=20, end_us=4 * H, max_fraction=0.1)
    assert score.flaps == 1
    assert score.recovery_to_release_s == [None]


def test_releases_between_the_bursts_of_an_intermittent_fault_are_not_flaps() -> None:
    truth = {"a": [(H, H + 30 * M), (2 * H, 2 * H + 30 * M)]}
    stays = [Span("a", H + 10 * M, H + 40 * M), Span("a", 2 * H + 10 * M, 2 * H + 40 * M)]
    score = score_run(truth, stays, nodes=20, end_us=4 * H, max_fraction=0.1)
    assert score.flaps == 0 and score.onset_to_listing_s == [600.0] and score.recovery_to_release_s == [600.0]


def test_chance_listings_and_the_cap_on_a_healthy_cluster() -> None:
    stays = [Span("x", H, H + 10 * M), Span("y", H, H + 5 * M), Span("x", 5 * H, 5 * H + 5 * M)]
    score = score_run({}, stays, nodes=10, end_us=6 * H, max_fraction=0.1)
    assert score.recall is None and score.precision == 0.0
    assert (score.chance_listings, score.chance_listed_s) == (3, 1200.0)
    assert (score.largest_listed, score.cap_exceeded) == (2, True)  # cap of 10 nodes at 10 %: 1
    assert score.cycles_per_hour == 1


def test_a_fault_never_listed_counts_against_recall_only() -> None:
    score = score_run({"a": [(H, None)], "b": [(H, None)]}, [Span("b", 2 * H, None)], nodes=100, end_us=3 * H,
                      max_fraction=0.1)
    assert score.recall == 0.5 and score.onset_to_listing_s == [None, 3600.0] and score.flaps == 0


def test_what_happens_after_the_scenario_ends_is_not_scored() -> None:
    # sparse-4x: jobs stop at the scenario's end; a slow node released while the last tasks drain did not flap
    stays = [Span("a", 2 * H, 9 * H), Span("z", 8 * H + 10 * M, 8 * H + 30 * M)]
    score = score_run({"a": [(H, None)]}, stays, nodes=20, end_us=8 * H, max_fraction=0.1)
    assert score.flaps == 0 and score.chance_listings == 0 and score.precision == 1.0
    inside = score_run({"a": [(H, None)]}, [Span("a", 2 * H, 7 * H)], nodes=20, end_us=8 * H, max_fraction=0.1)
    assert inside.flaps == 1


def test_a_node_listed_only_after_its_fault_ended_is_late_not_recall() -> None:
    # the review of session 8 found a 1.3x node of a 180-minute fault listed 25 minutes after recovery and
    # counted as recall (the acceptance's ">= 80 % of 1.3x nodes listed")
    hour = 3_600_000_000
    truth = {"a": [(hour, 4 * hour)], "b": [(hour, 4 * hour)]}
    stays = [Span("a", 2 * hour, 3 * hour), Span("b", 4 * hour + hour // 12, 5 * hour)]
    score = score_run(truth, stays, nodes=20, end_us=8 * hour, max_fraction=0.1)
    assert (score.recall, score.listed_late, score.precision) == (0.5, 1, 0.5)
    assert score.onset_to_listing_s == [3600.0, None]
