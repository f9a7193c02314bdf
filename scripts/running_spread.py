"""Session 8's choices for the running policy, replayed offline over tallies from scripts/running_tallies.py.

Usage: PYTHONPATH=. python scripts/running_spread.py TALLY_DIR (tuning seeds 101+ only). Prints, per scenario,
chance listings (healthy nodes ever listed), faulty nodes never listed while slow and the median minutes from onset
to listing, for the session-7 levels (``plain``), with the window and three windows judged against the cluster's
spread of node effects (``spread``: ``censored.node_spread`` over the three-window tallies, a random-effects z),
and with a second three-window level for large effects (``+large``: z >= 4.0 at an effect >= 1.5). Then the
release of every listed slow node replayed at 3.0 standard errors with and without an information floor of 3.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from streams.core.detection.censored import node_spread

sys.path.insert(0, str(Path(__file__).parent))
from running_levels import _scenario

MIN = 60_000_000
# (scale minutes, level, look every N minutes, min effect, judged against the spread)
PLAIN = [(m, 4.75, 1, 0.3, False) for m in (10, 12, 15, 20)] + [(60, 4.6, 5, 0.3, False), (180, 4.9, 5, 0.3, False)]
SPREAD = [*PLAIN[:4], (60, 4.6, 5, 0.3, True), (180, 4.9, 5, 0.3, True)]
RULES = {"plain": PLAIN, "spread": SPREAD, "spread +large": [*SPREAD, (180, 4.0, 5, 1.5, True)]}


def spread_z(data: dict[str, np.ndarray]) -> np.ndarray:
    """z judged against the spread of node effects over the 180-min tallies, every look and scale."""
    z, effect, tasks = data["z"].astype(float), data["effect"].astype(float), data["tasks"]
    with np.errstate(divide="ignore", invalid="ignore"):
        info = np.nan_to_num(np.where(effect != 0, (z / effect) ** 2, 0.0))
    j = list(data["scales"]).index(180)
    out = np.empty_like(z)
    for k in range(z.shape[0]):
        ok = (tasks[k, :, j] >= 5) & (info[k, :, j] > 0)
        tau2 = node_spread(effect[k, ok, j], info[k, ok, j])
        out[k] = z[k] / np.sqrt(1.0 + tau2 * info[k])
    return out


def first_listing(data: dict[str, np.ndarray], zs: np.ndarray, rule: list) -> np.ndarray:
    scales, minutes = list(data["scales"]), data["ends"] // MIN
    hit = np.zeros(data["z"].shape[:2], dtype=bool)
    for m, level, every, min_effect, spread in rule:
        j = scales.index(m)
        z = (zs if spread else data["z"])[:, :, j]
        hit |= ((data["tasks"][:, :, j] >= 5) & (data["effect"][:, :, j] >= min_effect) & (z >= level)
                & (minutes % every == 0)[:, None])
    hit &= (data["ends"] >= 60 * MIN)[:, None]
    return np.where(hit.any(axis=0), hit.argmax(axis=0), -1)


def release(data: dict[str, np.ndarray], i: int, k: int, found: float, floor: float) -> int | None:
    """The first look after ``k`` where a scale holding only tasks since the listing shows node ``i``'s effect
    3.0 standard errors below half the one it was found with, over >= 5 tasks and ``floor`` information."""
    scales, ends = list(data["scales"]), data["ends"]
    for q in range(k + 1, len(ends)):
        for m in (10, 12, 15, 20, 60, 180):
            j = scales.index(m)
            z, eff, n = (float(data[c][q, i, j]) for c in ("z", "effect", "tasks"))
            info = (z / eff) ** 2 if z and eff else 0.0
            if (m * MIN <= ends[q] - ends[k] and n >= 5 and info >= floor
                    and eff + 3.0 / math.sqrt(max(info, 1e-12)) < 0.5 * found):
                return q
    return None


def main(folder: Path) -> None:
    table: dict[tuple[str, str], dict[str, list[float]]] = {}
    releases: dict[tuple[str, float], list[str]] = {}
    for path in sorted(folder.glob("*.npz")):
        data = dict(np.load(path))
        spans, scenario, nodes = json.loads(str(data["spans"])), _scenario(path), list(data["nodes"])
        zs = spread_z(data)
        for name, rule in RULES.items():
            first = first_listing(data, zs, rule)
            row = table.setdefault((scenario, name), {"chance": [], "never": [], "delay": []})
            row["chance"] += [1.0 for i, n in enumerate(nodes) if first[i] >= 0 and n not in spans]
            for node, node_spans in spans.items():
                i = nodes.index(node)
                at = data["ends"][first[i]] if first[i] >= 0 else None
                end = node_spans[-1][1]
                if at is None or at < node_spans[0][0] or (end is not None and at >= end):
                    row["never"].append(1.0)
                    continue
                row["delay"].append((at - node_spans[0][0]) / MIN)
                if name != "spread":
                    continue
                k = first[i]
                scales = list(data["scales"])
                found = next(float(data["effect"][k, i, scales.index(m)]) for m, level, every, min_effect, spread
                             in rule if data["tasks"][k, i, scales.index(m)] >= 5
                             and data["effect"][k, i, scales.index(m)] >= min_effect
                             and (zs if spread else data["z"])[k, i, scales.index(m)] >= level
                             and (data["ends"][k] // MIN) % every == 0)  # the effect it was listed with
                for floor in (0.0, 3.0):
                    q = release(data, i, k, found, floor)
                    if q is not None:
                        active = any(a <= data["ends"][q] < (b or 1 << 62) for a, b in node_spans)
                        late = (data["ends"][q] - end) / MIN if end is not None and not active else None
                        releases.setdefault((scenario, floor), []).append("flap" if active else f"{late}")
                    else:
                        releases.setdefault((scenario, floor), []).append("never")
    for (scenario, name), row in sorted(table.items()):
        delay = f"{np.median(row['delay']):.0f}" if row["delay"] else "-"
        print(f"{scenario:18} {name:14} chance {len(row['chance'])} never {len(row['never'])} list med {delay}")
    for (scenario, floor), values in sorted(releases.items()):
        late = sorted(float(v) for v in values if v not in ("flap", "never", "None"))
        median = f"{np.median(late):.1f}" if late else "-"
        print(f"{scenario:18} release floor {floor:g}: flaps {values.count('flap')}, never released "
              f"{values.count('never')}, recovery to release med {median} min (n {len(late)})")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
