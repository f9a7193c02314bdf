"""Which guard of the running policy's shipped rule keeps each slow node unlisted, offline over tallies from
scripts/running_tallies.py (issue 21, session 9).

Usage: PYTHONPATH=. python scripts/running_guards.py TALLY_DIR SCENARIO|--chance (tuning seeds 101+ only;
``--chance``: every healthy node the shipped rule lists, and by which scale; ``--window``: the z against the spread
and the effect of every node the plain 60-minute window alone lists first, slow and healthy). For every slow
node the shipped rule (``running_spread.SHIPPED``, the spread by the default estimator) never lists while slow, and
for every scale of the rule, looks during the fault (after the first hour's warm-up, at the scale's own looks) are
counted by the first guard they fail, in the detector's order: ``tasks`` (< 5), ``effect`` (below the scale's minimum),
``z`` (plain z below the level), ``spread`` (plain z at the level, z against the spread below it). Printed: per scale,
the share of those looks each guard stopped; the node's best plain and spread z per scale and the minute (from onset)
of the best, the effect there; per spread scale, how many missed nodes failed only the spread at some look. Session
10's window and scans (listed at once against the spread, or after 3 passing looks) count here by their plain
guards: a look "passed" there may not have listed the node.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from running_levels import _scenario
from running_spread import DEFAULT, ESTIMATORS, MIN, SHIPPED, first_listing, spread_z


def main(folder: Path, scenario: str) -> None:
    stops: dict[tuple[int, float], Counter] = defaultdict(Counter)
    best: dict[tuple[int, float], list[tuple[float, float, float, float]]] = defaultdict(list)
    missed = listed = 0
    only_spread: Counter = Counter()  # per scale: missed nodes some look of which failed the spread alone
    taus: list[float] = []
    for path in sorted(folder.glob("*.npz")):
        if _scenario(path) != scenario:
            continue
        data = dict(np.load(path))
        zs, tau = spread_z(data, ESTIMATORS[DEFAULT])
        taus += tau
        first = first_listing(data, zs, SHIPPED)
        spans, nodes, ends = json.loads(str(data["spans"])), list(data["nodes"]), data["ends"]
        minutes, scales = ends // MIN, list(data["scales"])
        for node, node_spans in spans.items():
            i, onset, end = nodes.index(node), node_spans[0][0], node_spans[-1][1]
            at = ends[first[i]] if first[i] >= 0 else None
            if at is not None and onset <= at and (end is None or at < end):
                listed += 1
                continue
            missed += 1
            active = (ends >= max(onset, 60 * MIN)) & (ends < (end or 1 << 62))
            for m, level, every, min_effect, spread in _scales():
                j = scales.index(m)
                ks = np.flatnonzero(active & (minutes % every == 0))
                plain, against = data["z"][ks, i, j], zs[ks, i, j]
                judged = against if spread is True else plain
                for k, p, a in zip(ks, plain, judged, strict=True):
                    if data["tasks"][k, i, j] < 5:
                        stops[(m, level)]["tasks"] += 1
                    elif data["effect"][k, i, j] < min_effect:
                        stops[(m, level)]["effect"] += 1
                    elif p < level:
                        stops[(m, level)]["z"] += 1
                    elif a < level:
                        stops[(m, level)]["spread"] += 1
                    else:
                        stops[(m, level)]["passed"] += 1
                if spread is True and any(
                        data["tasks"][k, i, j] >= 5 and data["effect"][k, i, j] >= min_effect and p >= level > a
                        for k, p, a in zip(ks, plain, judged, strict=True)):
                    only_spread[(m, level)] += 1
                top = int(np.argmax(judged)) if len(ks) else None
                if top is not None:
                    best[(m, level)].append((float(plain.max()), float(judged.max()),
                                             float((ends[ks[top]] - onset) / MIN),
                                             float(data["effect"][ks[top], i, j])))
    print(f"{scenario}: {listed} slow nodes listed while slow, {missed} never; mean tau {np.mean(taus):.3f}")
    print("scale level | looks stopped by: tasks / effect / z / spread (passed) | best plain z, best judged z "
          "(median over missed nodes), minute of the best (median), effect there (median)")
    for key in stops:
        c, n = stops[key], sum(stops[key].values())
        share = " / ".join(f"{100 * c[g] / n:.0f}%" for g in ("tasks", "effect", "z", "spread"))
        b = np.array(best[key])
        print(f"{key[0]:>4} min {key[1]:g} | {share} ({c['passed']}) | {np.median(b[:, 0]):.2f}, "
              f"{np.median(b[:, 1]):.2f} | {np.median(b[:, 2]):.0f} | {np.median(b[:, 3]):.2f}"
              + (f" | {only_spread[key]} missed nodes stopped by the spread alone at some look"
                 if key in only_spread else ""))


def _scales() -> list[tuple]:
    """The rule's scales once each (an at-once and a repeat entry of one scale share its guards)."""
    return list(dict.fromkeys(tuple(entry[:5]) if entry[4] is True else (*entry[:4], False) for entry in SHIPPED))


def listing_scales(data: dict, zs: np.ndarray, minute: np.ndarray, k: int, i: int) -> list[tuple]:
    """The shipped rule's scales that list node ``i`` at look ``k``: (minutes, level, scale index) each; a repeat
    entry lists when this look and its ``repeat - 1`` looks before all passed."""
    scales, passing = list(data["scales"]), []
    for m, level, every, min_effect, spread, *extra in SHIPPED:
        j, repeat = scales.index(m), int(extra[1]) if len(extra) > 1 else 1
        looks = [q for q in range(k, -1, -1) if minute[q] % every == 0][:repeat]
        if (m, level, j) in passing or not looks or looks[0] != k or len(looks) < repeat:
            continue
        if all(_passes(data, zs, q, i, j, (level, min_effect, spread)) for q in looks):
            passing.append((m, level, j))
    return passing


def _passes(data: dict, zs: np.ndarray, q: int, i: int, j: int, guards: tuple) -> bool:
    level, min_effect, spread = guards
    judged = zs[q, i, j] if spread is True else data["z"][q, i, j]
    also = isinstance(spread, bool) or zs[q, i, j] >= spread  # an at-once entry: against the spread too
    return bool(data["tasks"][q, i, j] >= 5 and data["effect"][q, i, j] >= min_effect and judged >= level and also)


def chance(folder: Path) -> None:
    """Every healthy node the shipped rule lists, with the scales that list it at its first listing."""
    print("file | node | minute | scale level: plain z, z against the spread, effect, tasks | tau")
    for path in sorted(folder.glob("*.npz")):
        data = dict(np.load(path))
        zs, taus = spread_z(data, ESTIMATORS[DEFAULT])
        first = first_listing(data, zs, SHIPPED)
        spans, nodes = json.loads(str(data["spans"])), list(data["nodes"])
        minute = data["ends"] // MIN
        for i in np.flatnonzero(first >= 0):
            if nodes[i] in spans:
                continue
            k = first[i]
            why = [f"{m} min {level:g}: {data['z'][k, i, j]:.2f}, {zs[k, i, j]:.2f}, "
                   f"{data['effect'][k, i, j]:.2f}, {data['tasks'][k, i, j]}"
                   for m, level, j in listing_scales(data, zs, minute, k, i)]
            tau = taus[int((minute[: k + 1] % 5 == 0).sum()) - 1]  # the last 5-minute look's
            print(f"{path.stem} | {nodes[i]} | {minute[k]} | {'; '.join(why)} | {tau:.3f}")


def window_only(folder: Path) -> None:
    """Per scenario, the slow nodes the shipped rule first lists by the plain 60-minute window alone: their z
    against the spread and effect there (what a spread-aware window must keep) beside healthy ones (``chance``)."""
    rows: dict[tuple[str, bool], list[tuple[float, float]]] = defaultdict(list)
    for path in sorted(folder.glob("*.npz")):
        data = dict(np.load(path))
        zs, _ = spread_z(data, ESTIMATORS[DEFAULT])
        first = first_listing(data, zs, SHIPPED)
        spans, nodes, scales = json.loads(str(data["spans"])), list(data["nodes"]), list(data["scales"])
        minute = data["ends"] // MIN
        for i in np.flatnonzero(first >= 0):
            k = first[i]
            by = [m for m, _, _ in listing_scales(data, zs, minute, k, i)]
            if by == [60]:
                j = scales.index(60)
                rows[(_scenario(path), nodes[i] in spans)].append((float(zs[k, i, j]), float(data["effect"][k, i, j])))
    print("scenario | slow? | n listed by the window alone | their z against the spread (sorted) | effects (sorted)")
    for (scenario, slow), values in sorted(rows.items()):
        zs_, effs = sorted(v[0] for v in values), sorted(v[1] for v in values)
        print(f"{scenario} | {slow} | {len(values)} | {' '.join(f'{v:.2f}' for v in zs_)} | "
              f"{' '.join(f'{v:.2f}' for v in effs)}")


if __name__ == "__main__":
    if sys.argv[2] == "--chance":
        chance(Path(sys.argv[1]))
    elif sys.argv[2] == "--window":
        window_only(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]), sys.argv[2])
