"""The information bound for listing a 2x node from task durations (issue 21, docs/scenarios.md).

Usage: PYTHONPATH=. python scripts/information_bound.py. Tuning seeds only (101+). Measures, from the scenario
generator itself:

1. the within-job spread of log task durations on healthy nodes (``sigma``) and the shift of a 2x node's tasks
   (``delta``; cpu-2x, tasks started after the onset and ended before the recovery), so the Kullback-Leibler
   information of one finished task about a 2x slowdown, ``KL = delta^2 / (2 sigma^2)`` (Gaussian in log time);
2. how many tasks a 2x node starts and finishes per minute after its onset;
3. an oracle CUSUM (Page) per node on finished tasks' log-time residuals against their job's mean (the detector
   knows ``delta`` and ``sigma``; nothing a real detector can beat from durations), its threshold set to the
   largest value any healthy node reached over the healthy tuning days (zero chance listings there), and the
   delay from onset until a 2x node passes it.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

import numpy as np

from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.core.events import TaskFinish

MIN = 60_000_000


def tasks(name: str, seed: int) -> tuple[list[tuple[str, str, int, int]], dict[str, list]]:
    """(job, node, start, duration) of every finished task, and the slow spans."""
    sim = ClusterSim(SCENARIOS[name], seed)
    out = [(e.job_id, e.node_id, e.ts_us - e.duration_us, e.duration_us) for e in sim if isinstance(e, TaskFinish)]
    return out, sim.ground_truth["slow_spans"]


def residuals(rows: list[tuple[str, str, int, int]], slow: set[str]) -> np.ndarray:
    """log duration minus the mean log duration of the job's other tasks on healthy nodes (leave one out)."""
    by_job: dict[str, list[float]] = defaultdict(list)
    for job, node, _, d in rows:
        if node not in slow:
            by_job[job].append(math.log(d))
    sums = {job: (sum(v), len(v)) for job, v in by_job.items()}
    out = []
    for job, node, _, d in rows:
        s, n = sums.get(job, (0.0, 0))
        own = math.log(d)
        if node not in slow:
            s, n = s - own, n - 1
        out.append(own - s / n if n >= 3 else math.nan)
    return np.array(out)


def main() -> None:
    sig, shifts, start_rate, finish_rate = [], [], [], []
    for seed in range(101, 106):
        rows, spans = tasks("cpu-2x", seed)
        slow = set(spans)
        r = residuals(rows, slow)
        healthy = np.array([node not in slow for _, node, _, _ in rows]) & ~np.isnan(r)
        sig.append(float(np.std(r[healthy])))
        for node, node_spans in spans.items():
            onset, end = node_spans[0][0], node_spans[-1][1]
            inside = [i for i, (_, n, s, d) in enumerate(rows) if n == node and s >= onset and s + d < end]
            shifts.extend(r[i] for i in inside if not math.isnan(r[i]))
            starts = sum(1 for _, n, s, _ in rows if n == node and onset <= s < end)
            ends = sum(1 for _, n, s, d in rows if n == node and onset <= s + d < end)
            start_rate.append(starts / ((end - onset) / MIN))
            finish_rate.append(ends / ((end - onset) / MIN))
    sigma, delta = statistics.fmean(sig), statistics.fmean(shifts)
    kl = delta**2 / (2 * sigma**2)
    print(f"sigma (healthy, within job, log time) {sigma:.3f}; 2x shift {delta:.3f} (ln 2 = {math.log(2):.3f}); "
          f"KL per finished task {kl:.3f} nats")
    print(f"2x node after onset: starts {statistics.fmean(start_rate):.2f}/min, finishes "
          f"{statistics.fmean(finish_rate):.2f}/min")
    # Oracle CUSUM: increments (delta / sigma^2) (r - delta / 2) in finish order per node.
    def cusum_paths(rows: list[tuple[str, str, int, int]], r: np.ndarray) -> dict[str, tuple[list[int], np.ndarray]]:
        by_node: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for (_, node, s, d), x in zip(rows, r, strict=True):
            if not math.isnan(x):
                by_node[node].append((s + d, (delta / sigma**2) * (x - delta / 2)))
        out = {}
        for node, items in by_node.items():
            items.sort()
            g, path = 0.0, []
            for _, inc in items:
                g = max(0.0, g + inc)
                path.append(g)
            out[node] = ([t for t, _ in items], np.array(path))
        return out

    highest, crossings = [], []
    for name, seeds in (("healthy-dense-24h", range(101, 106)), ("healthy-24h", range(101, 106))):
        for seed in seeds:
            rows, _ = tasks(name, seed)
            paths = cusum_paths(rows, residuals(rows, set()))
            highest.append(max(float(p.max()) for _, p in paths.values()))
            crossings.extend(float(p.max()) for _, p in paths.values())
            print(f"{name} {seed}: healthy CUSUM max {highest[-1]:.2f} (tasks {len(rows)})", flush=True)
    h = max(highest)
    levels = sorted({4.0, 5.0, 6.0, 7.0, 8.0, 9.0, round(h, 2)})
    delays: dict[float, list[float]] = {level: [] for level in levels}
    for seed in range(101, 111):
        rows, spans = tasks("cpu-2x", seed)
        paths = cusum_paths(rows, residuals(rows, set(spans)))
        for node, node_spans in spans.items():
            onset = node_spans[0][0]
            times, path = paths[node]
            for level in levels:
                after = [t for t, g in zip(times, path, strict=True) if t >= onset and g >= level]
                delays[level].append((after[0] - onset) / MIN if after else math.inf)
    print(f"threshold h = {h:.2f} nats (zero healthy crossings over {len(highest)} tuning days); tasks needed "
          f"h / KL = {h / kl:.1f}, at {statistics.fmean(start_rate):.2f} starts/min "
          f"{h / kl / statistics.fmean(start_rate):.1f} min")
    for level in levels:
        chance = sum(c >= level for c in crossings)
        print(f"oracle CUSUM h {level:5.2f}: 2x delay median {statistics.median(delays[level]):.1f} min (min "
              f"{min(delays[level]):.1f}, max {max(delays[level]):.1f}); healthy nodes crossing it over the "
              f"{len(highest)} tuning days: {chance}")


if __name__ == "__main__":
    main()
