"""Replay listing rules offline over tallies recorded by scripts/running_tallies.py (tuning seeds only).

Usage: PYTHONPATH=. python scripts/running_levels.py TALLY_DIR. A rule maps scales (minutes) to (level, look
every N minutes); a node is listed at the first look (after the first hour, the warm-up) where some scale it
judges at that look has >= 5 tasks, effect >= 0.3 and z >= its level. Chance: healthy nodes ever listed; for
faulty runs: onset to listing per slow node (minutes) and how many were never listed while slow.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np

MIN = 60_000_000
Rule = dict[int, tuple[float, int]]  # scale minutes -> (level, look every this many minutes)


def _scenario(path: Path) -> str:
    """``cpu-2x-101-c4-mean.npz`` -> ``cpu-2x``."""
    match = re.match(r"^(.*?)-\d+(-.*)?$", path.stem)
    return match.group(1) if match else path.stem


def first_listing(data: dict[str, np.ndarray], rule: Rule, min_tasks: int = 5,
                  min_effect: float = 0.3) -> np.ndarray:
    """Per node, the index of the first look it is listed at (-1: never)."""
    scales = list(data["scales"])
    ends = data["ends"]
    minutes = ends // MIN
    hit = np.zeros(data["z"].shape[:2], dtype=bool)
    for m, (level, every) in rule.items():
        j = scales.index(m)
        ok = (data["tasks"][:, :, j] >= min_tasks) & (data["effect"][:, :, j] >= min_effect) & (
            data["z"][:, :, j] >= level)
        ok &= (minutes % every == 0)[:, None]
        hit |= ok
    hit &= (ends >= 60 * MIN)[:, None]  # the warm-up: one window after the first event
    any_hit = hit.any(axis=0)
    return np.where(any_hit, hit.argmax(axis=0), -1)


def evaluate(files: list[Path], rule: Rule) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for path in files:
        data = dict(np.load(path))
        spans = json.loads(str(data["spans"]))
        first = first_listing(data, rule)
        scenario = _scenario(path)
        nodes = list(data["nodes"])
        chance = [n for i, n in enumerate(nodes) if first[i] >= 0 and n not in spans]
        out.setdefault(f"{scenario} chance", []).append(len(chance))
        for node, node_spans in spans.items():
            onset, end = node_spans[0][0], node_spans[-1][1]
            i = nodes.index(node)
            at = data["ends"][first[i]] if first[i] >= 0 else None
            if at is None or (end is not None and at >= end) or at < onset:
                out.setdefault(f"{scenario} never", []).append(1)
            else:
                out.setdefault(f"{scenario} delay", []).append((at - onset) / MIN)
    return out


def summary(result: dict[str, list[float]]) -> str:
    parts = []
    for key in sorted(result):
        values = result[key]
        if key.endswith("chance"):
            parts.append(f"{key} {int(sum(values))}")
        elif key.endswith("never"):
            parts.append(f"{key} {len(values)}")
        else:
            parts.append(f"{key} med {np.median(values):.0f} max {max(values):.0f} n {len(values)}")
    return "; ".join(parts)


def max_z(files: list[Path], every: dict[int, int]) -> None:
    """Per healthy scenario and scale: the largest z of a healthy node passing the sample and effect guards."""
    table: dict[str, dict[int, list[float]]] = {}
    for path in files:
        data = dict(np.load(path))
        spans = json.loads(str(data["spans"]))
        if spans:
            continue
        scenario = _scenario(path)
        minutes = data["ends"] // MIN
        for j, m in enumerate(data["scales"]):
            ok = (data["tasks"][:, :, j] >= 5) & (data["effect"][:, :, j] >= 0.3) & (minutes >= 60)[:, None]
            ok &= (minutes % every.get(int(m), 1) == 0)[:, None]
            z = np.where(ok, data["z"][:, :, j], -np.inf)
            table.setdefault(scenario, {}).setdefault(int(m), []).append(float(z.max()))
    for scenario, by_scale in sorted(table.items()):
        print(scenario, " ".join(f"{m}:{max(v):.2f}(q50 {np.median(v):.2f})" for m, v in sorted(by_scale.items())))


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    files = sorted(folder.glob("*.npz"))
    max_z(files, {})
    max_z(files, {60: 5, 180: 5})


def replay_release(files: list[Path], rule: Rule, z_release: float, every: int = 1, ratio: float = 0.5,
                   release_tasks: int = 5) -> dict[str, list[float]]:
    """Replay listing and the first release of every slow node: flaps (released while its fault is active) and
    recovery to release (minutes). Exact up to the first release (the detector's ``since`` changes then).
    ``every``: the release is judged only at looks a multiple of this many minutes."""
    out: dict[str, list[float]] = {}
    for path in files:
        data = dict(np.load(path))
        spans = json.loads(str(data["spans"]))
        if not spans:
            continue
        scenario = _scenario(path)
        nodes, scales, ends = list(data["nodes"]), list(data["scales"]), data["ends"]
        first = first_listing(data, rule)
        order = sorted(rule)
        for node, node_spans in spans.items():
            i = nodes.index(node)
            k = first[i]
            if k < 0:
                continue
            found = next(float(data["effect"][k, i, scales.index(m)]) for m in order
                         if data["z"][k, i, scales.index(m)] >= rule[m][0]
                         and data["effect"][k, i, scales.index(m)] >= 0.3
                         and data["tasks"][k, i, scales.index(m)] >= 5 and (ends[k] // MIN) % rule[m][1] == 0)
            released = None
            for q in range(k + 1, len(ends)):
                if (ends[q] // MIN) % every:
                    continue
                for m in order:
                    j = scales.index(m)
                    z, eff, n = (float(data[c][q, i, j]) for c in ("z", "effect", "tasks"))
                    stderr = eff / z if z and eff else 1.0 / math.sqrt(max(n, 1))
                    if m * MIN <= ends[q] - ends[k] and n >= release_tasks and eff + z_release * stderr < ratio * found:
                        released = ends[q]
                        break
                if released is not None:
                    break
            if released is None:
                continue
            active = any(a <= released < (b if b is not None else 1 << 62) for a, b in node_spans)
            if active:
                out.setdefault(f"{scenario} flaps", []).append(1)
            else:
                recovery = node_spans[-1][1]
                if recovery is not None and released >= recovery:
                    out.setdefault(f"{scenario} release", []).append((released - recovery) / MIN)
    return out
