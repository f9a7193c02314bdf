"""The running policy's shipped listing rule replayed offline with a floor on the duration ratio (issue 21, h58).

Usage: PYTHONPATH=. python scripts/running_ratio.py TALLY_DIR [--floors=1.0,1.1,...] [--halves]

TALLY_DIR holds tallies from ``scripts/running_tallies.py`` (with ``log_ratio``; tuning seeds 101+ only). Every look
of every scale of ``running_spread.SHIPPED`` (the detector's rule at a 60-s period) must also show the node's tasks
running at least FLOOR times their job siblings' durations (``Tally.ratio``, ``RunningTaskDetector.min_ratio``);
the spread of node effects is estimated as the detector does (``censored.node_spread``), before the floor. Prints one
markdown row per floor: per scenario, chance listings (healthy nodes ever listed) / slow nodes never listed while
slow (of how many; the median minutes from onset to listing), and per file the healthy nodes listed with the ratio
they were listed at (``--chance``). ``--halves``: the same table for seeds 101-105 and 106+ apart.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from running_levels import _scenario
from running_spread import DEFAULT, ESTIMATORS, SHIPPED, _score, first_listing, spread_z, table_cell

FLOORS = (1.0, 1.05, 1.08, 1.1, 1.12, 1.15, 1.18, 1.2, 1.25)


def listings(data: dict[str, np.ndarray], zs: np.ndarray, floor: float) -> np.ndarray:
    """Per node, the first look the shipped rule lists it at with the ratio floor (-1: never): a look below the
    floor does not pass, as the detector's ``_clearly_slow``."""
    masked = dict(data)
    low = data["log_ratio"].astype(float) < math.log(floor) if floor > 1.0 else np.zeros(data["z"].shape, bool)
    masked["effect"] = np.where(low, -np.inf, data["effect"])
    return first_listing(masked, zs, SHIPPED)


def main(folder: Path, floors: tuple[float, ...], halves: bool, chance: bool) -> None:
    table: dict[tuple[str, str, float], dict[str, list[float]]] = {}
    for path in sorted(folder.glob("*.npz")):
        data = dict(np.load(path))
        zs, _ = spread_z(data, ESTIMATORS[DEFAULT])
        seed = int(path.stem[len(_scenario(path)) + 1:].split("-")[0])
        half = "all" if not halves else ("101-105" if seed <= 105 else "106+")
        spans, nodes = json.loads(str(data["spans"])), list(data["nodes"])
        for floor in floors:
            first = listings(data, zs, floor)
            _score(data, first, table.setdefault((half, _scenario(path), floor),
                                                 {"chance": [], "never": [], "delay": []}))
            if chance:
                for i, node in enumerate(nodes):
                    if first[i] >= 0 and node not in spans:
                        k = first[i]
                        ratio = np.exp(data["log_ratio"][k, i]).round(2).tolist()
                        print(f"{path.stem} floor {floor:g}: {node} at {data['ends'][k] // 60_000_000} min, "
                              f"ratio per scale {ratio}")
    for half in sorted({h for h, _, _ in table}):
        scenarios = sorted({s for h, s, _ in table if h == half})
        counts = {s: len(table[(half, s, floors[0])]["never"]) + len(table[(half, s, floors[0])]["delay"])
                  for s in scenarios}
        print(f"\nseeds {half} ({folder.name})")
        print("| ratio floor | " + " | ".join(f"{s} ({counts[s]})" if counts[s] else s for s in scenarios) + " |")
        print("|---" * (len(scenarios) + 1) + "|")
        for floor in floors:
            cells = [table_cell(table[(half, s, floor)], bool(counts[s])) for s in scenarios]
            print(f"| {floor:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    flags = sys.argv[2:]
    given = [f.split("=", 1)[1] for f in flags if f.startswith("--floors=")]
    chosen = tuple(float(x) for x in given[0].split(",")) if given else FLOORS
    main(Path(sys.argv[1]), chosen, "--halves" in flags, "--chance" in flags)
