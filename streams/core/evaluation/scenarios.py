"""Blacklist quality on one fault scenario run (issue 21, SPEC 7): how soon, how stable, how many by chance.

The truth is each faulty node's spans of active fault (``slow_spans``, event-time microseconds, end None
while it lasts); the run is the blacklist's stays (``detection.Span``, from ``DetectionScore.spans()``).

* *precision* and *recall* by node: a listed node is right if a stay of it began before its fault's last
  end (a node still listed a little after its recovery is slow release, measured below, not a false
  listing); a faulty node first listed only after its fault ended is *listed late*: not recall, and wrong
  for precision (a reviewer found 1.3x nodes listed 25 minutes after recovery counted as recall);
* *onset to listing*: from a faulty node's first onset to its first listing at or after it that began
  while it was still faulty (a node listed before its onset and still listed then counts 0);
* *recovery to release*: from a fault's last end to the release of the stay that covered it (None while
  it never left);
* *flaps*: releases of a node while its fault is active (the issue's "released mid-fault");
* *chance listings*: stays of nodes that were never faulty;
* *largest share*: the most nodes listed at once over the cluster's nodes, and whether it passed the cap;
* *cycles per hour*: the most listings of one node that began within any one hour.

Everything is judged up to the scenario's end (``end_us``): listings after it are dropped, and a stay that
lasts past it is still open (a node released while the last tasks drain was not released mid-fault).

>>> H = 3_600_000_000
>>> truth = {"a": [(1 * H, 3 * H)], "b": [(1 * H, None)]}
>>> stays = [Span("a", H + H // 6, 2 * H), Span("a", 2 * H + H // 12, 3 * H + H // 4),
...          Span("z", 5 * H, 5 * H + H // 12)]
>>> score = score_run(truth, stays, nodes=10, end_us=6 * H, max_fraction=0.1)
>>> score.precision, score.recall, score.onset_to_listing_s, score.recovery_to_release_s
(0.5, 0.5, [600.0, None], [900.0])
>>> score.flaps, score.chance_listings, score.largest_listed, score.cap_exceeded, score.cycles_per_hour
(1, 1, 1, False, 2)
>>> score_run(truth, [Span("b", 2 * H, 7 * H), Span("z", 6 * H, 7 * H)], 10, 6 * H, 0.1).flaps  # past the end
0
>>> late = score_run(truth, [Span("a", 3 * H + H // 4, 4 * H)], 10, 6 * H, 0.1)  # a recovered at 3 H
>>> late.recall, late.listed_late, late.precision, late.onset_to_listing_s
(0.0, 1, 0.0, [None, None])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streams.core.evaluation.detection import Span

US_PER_S = 1_000_000
HOUR_US = 3_600 * US_PER_S

SlowSpans = Mapping[str, Sequence[tuple[int, int | None]]]


@dataclass(frozen=True, slots=True)
class RunScore:
    """The figures of one run; lists hold one value per faulty node (None: never listed / never released)."""

    faulty: int
    listed_faulty: int
    listed_healthy: int
    precision: float | None
    recall: float | None
    onset_to_listing_s: list[float | None]
    recovery_to_release_s: list[float | None]
    flaps: int
    chance_listings: int
    chance_listed_s: float
    largest_listed: int
    largest_share: float
    cap_exceeded: bool
    cycles_per_hour: int
    listed_late: int = 0  # faulty nodes listed only after their fault had ended


def score_run(truth: SlowSpans, stays: Sequence[Span], nodes: int, end_us: int, max_fraction: float) -> RunScore:
    """Score one run's blacklist stays against the faulty nodes' active spans (see the module text).

    ``end_us`` is the scenario's end, not its last event: what the blacklist does while the last tasks
    drain (no new job, so no new evidence) is not scored; a stay still open at ``end_us`` never ended."""
    faulty = {node for node, spans in truth.items() if spans}
    by_node: dict[str, list[tuple[int, int]]] = {}
    stays = [Span(s.node_id, s.start_us, None if s.end_us is None or s.end_us >= end_us else s.end_us)
             for s in stays if s.start_us < end_us]
    for stay in stays:
        by_node.setdefault(stay.node_id, []).append((stay.start_us, end_us if stay.end_us is None else stay.end_us))
    for node_stays in by_node.values():
        node_stays.sort()
    listed_faulty = sorted(node for node in faulty & set(by_node) if _while_faulty(truth[node], by_node[node]))
    late = len(faulty & set(by_node)) - len(listed_faulty)
    healthy = sorted(set(by_node) - faulty)
    onset = [_onset_to_listing(truth[node], _while_faulty(truth[node], by_node.get(node, [])))
             for node in sorted(faulty)]
    release = [r for node in sorted(faulty) for r in _recovery_to_release(truth[node], by_node.get(node, []), end_us)]
    flaps = sum(_releases_inside(truth[node], by_node[node], end_us) for node in listed_faulty)
    chance = [(b - a) for node in healthy for a, b in by_node[node]]
    largest = _largest_concurrent(stays, end_us)
    cap = int(max_fraction * nodes + 1e-9)
    return RunScore(
        faulty=len(faulty), listed_faulty=len(listed_faulty), listed_healthy=len(healthy),
        precision=len(listed_faulty) / len(by_node) if by_node else None,
        recall=len(listed_faulty) / len(faulty) if faulty else None,
        onset_to_listing_s=onset, recovery_to_release_s=release, flaps=flaps,
        chance_listings=len(chance), chance_listed_s=sum(chance) / US_PER_S,
        largest_listed=largest, largest_share=largest / nodes if nodes else 0.0, cap_exceeded=largest > cap,
        cycles_per_hour=max((_most_in_an_hour([a for a, _ in s]) for s in by_node.values()), default=0),
        listed_late=late,
    )  # fmt: skip


def _while_faulty(spans: Sequence[tuple[int, int | None]], stays: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stays that began before the fault's last end (all of them while it lasts)."""
    last_end = spans[-1][1]
    return [stay for stay in stays if last_end is None or stay[0] < last_end]


def _onset_to_listing(spans: Sequence[tuple[int, int | None]], stays: Sequence[tuple[int, int]]) -> float | None:
    onset = spans[0][0]
    for start, end in stays:
        if end > onset:
            return max(0, start - onset) / US_PER_S
    return None


def _recovery_to_release(
    spans: Sequence[tuple[int, int | None]], stays: Sequence[tuple[int, int]], end_us: int
) -> list[float | None]:
    recovery = spans[-1][1]
    if recovery is None:
        return []
    for start, end in stays:
        if start <= recovery < end:
            return [None if end >= end_us else (end - recovery) / US_PER_S]
    return []  # not listed when it recovered: nothing to release


def _releases_inside(spans: Sequence[tuple[int, int | None]], stays: Sequence[tuple[int, int]], end_us: int) -> int:
    releases = [end for _, end in stays if end < end_us]
    return sum(1 for at in releases for a, b in spans if a <= at < (end_us if b is None else b))


def _largest_concurrent(stays: Sequence[Span], end_us: int) -> int:
    changes = sorted([(s.start_us, 1) for s in stays]
                     + [(end_us if s.end_us is None else s.end_us, -1) for s in stays], key=lambda c: (c[0], c[1]))
    current = largest = 0
    for _, step in changes:
        current += step
        largest = max(largest, current)
    return largest


def _most_in_an_hour(starts: Sequence[int]) -> int:
    most, first = 0, 0
    for last, at in enumerate(starts):
        while at - starts[first] >= HOUR_US:
            first += 1
        most = max(most, last - first + 1)
    return most
