"""A per-node CUSUM on the node's own standardised scores against its own earlier level, offline over tallies from
scripts/running_tallies.py (issue 21, session 10: can 1.3x on heterogeneous hardware be found this way?).

Usage: PYTHONPATH=. python scripts/running_cusum.py TALLY_DIR [SHIFT] (tuning seeds 101+ only). Every 10 minutes
the tasks a node started 20-30 minutes earlier (the 30-minute tally less the 20-minute one: by then nearly all have
finished) form one block, its sum of censored scores ``T`` over information ``I``. The node's own level ``mu0`` is
its effect over the (up to) 180 minutes that ended an hour before the block (a static hardware offset cancels), shrunk
toward the cluster (0) by the spread of node effects between nodes, estimated as the shipped detector does. The
CUSUM ``S = max(0, S + d (T - mu0 I) - d^2 I / 2)`` (``d``: SHIFT job std, default 0.5, about 1.3x) is the log
likelihood ratio of a shift ``d`` since its last zero. Printed per scenario: the largest ``S`` of any healthy node
(each day's maximum, so a level above all of them lists none of them), and for the slow nodes the largest ``S``
while slow and the minutes from onset to crossing, while slow, a level set at the healthy nodes' maximum.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from running_levels import _scenario
from running_spread import DEFAULT, ESTIMATORS, MIN

BLOCK, LAG = 10, 60  # minutes between blocks; how far the node's own level lags behind


def _sums(data: dict[str, np.ndarray], minutes: int) -> tuple[np.ndarray, np.ndarray]:
    """Score totals and information of scale ``minutes`` at every look, every node."""
    j = list(data["scales"]).index(minutes)
    z, effect = data["z"][:, :, j].astype(float), data["effect"][:, :, j].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        info = np.nan_to_num(np.where(effect != 0, (z / effect) ** 2, 0.0))
    return effect * info, info


def cusum(data: dict[str, np.ndarray], shift: float) -> tuple[np.ndarray, np.ndarray]:
    """The CUSUM of every node at every 10-minute look (looks x nodes) and those looks' minutes."""
    minute = data["ends"] // MIN
    t30, i30 = _sums(data, 30)
    t20, i20 = _sums(data, 20)
    t180, i180 = _sums(data, 180)
    looks = np.flatnonzero((minute % BLOCK == 0) & (minute >= 30 + LAG + 30))  # a level from >= 30 min of tasks
    out = np.zeros((len(looks), t30.shape[1]))
    s = np.zeros(t30.shape[1])
    for n, k in enumerate(looks):
        total, info = t30[k] - t20[k], np.maximum(i30[k] - i20[k], 0.0)
        base = k - LAG - 30  # the (up to) 180 minutes ending an hour before the block's first start
        ok = (data["tasks"][base, :, -1] >= 5) & (i180[base] > 0)
        tau2 = ESTIMATORS[DEFAULT](t180[base, ok] / i180[base, ok], i180[base, ok], np.zeros(int(ok.sum())))
        mu0 = np.where(ok, t180[base] / (i180[base] + 1.0 / max(tau2, 1e-6)), 0.0)  # shrunk toward the cluster
        s = np.maximum(0.0, s + shift * (total - mu0 * info) - shift * shift * info / 2)
        out[n] = s
    return out, minute[looks]


def main(folder: Path, shift: float) -> None:
    healthy: dict[str, list[float]] = {}
    slow: dict[str, list[tuple[float, np.ndarray, np.ndarray, int]]] = {}
    for path in sorted(folder.glob("*.npz")):
        data = dict(np.load(path))
        s, minutes = cusum(data, shift)
        if not len(minutes):
            continue
        spans, nodes = json.loads(str(data["spans"])), list(data["nodes"])
        sick = [nodes.index(n) for n in spans]
        well = np.setdiff1d(np.arange(len(nodes)), sick)
        healthy.setdefault(_scenario(path), []).append(float(s[:, well].max()))
        for node, node_spans in spans.items():
            i, (onset, end) = nodes.index(node), node_spans[0]
            active = (minutes * MIN >= onset) & (minutes * MIN < (end or 1 << 62))
            slow.setdefault(_scenario(path), []).append((float(s[active, i].max(initial=0.0)),
                                                         np.where(active, s[:, i], 0.0), minutes, onset // MIN))
    level = max(max(v) for v in healthy.values())
    print(f"shift {shift:g} job std; blocks of {BLOCK} min; own level {LAG} min before (180-min effect, shrunk)")
    for scenario, maxima in sorted(healthy.items()):
        print(f"{scenario:18} healthy nodes' largest S per run: median {np.median(maxima):.1f}, max {max(maxima):.1f}")
    print(f"level = the largest over all healthy nodes: {level:.1f}")
    for scenario, rows in sorted(slow.items()):
        found = [int(m[np.argmax(s > level)] - onset) for _, s, m, onset in rows if (s > level).any()]
        best = np.array([r[0] for r in rows])
        print(f"{scenario:18} slow nodes: S while slow median {np.median(best):.1f}; above the level {len(found)} "
              f"of {len(rows)} (median {np.median(found) if found else float('nan'):.0f} min after onset)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.5)
