"""Record the running detector's per-node tallies every minute of one scenario run, for tuning its levels offline.

Usage: PYTHONPATH=. python scripts/running_tallies.py OUT_DIR SCENARIO SEED [SEED ...] [--checkpoints N]
[--noise S] [--mean-rate] [--sigma S]. Writes OUT_DIR/SCENARIO-SEED[-cN][-mean][-sS].npz with ``z``, ``effect``,
``tasks``, ``log_ratio`` (the effect in log duration, ``Tally.ratio``'s log; looks x nodes x scales), ``ends`` (the
look times, us), ``nodes``, ``scales`` (minutes) and the slow nodes' active spans. ``--sigma``: the scenario's
within-job spread of log task time (``Scenario.task_sigma``, 0.5 unless set; Google 2011's is 0.22).
Tuning seeds only (101+): seeds 1-10 are the reported ones. The detector never lists here (its level is
infinite), so every tally is what the detector would see before its first listing (after it, ``since`` differs).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.core.detection.base import observe_task
from streams.core.detection.running import RunningTaskDetector
from streams.core.detection.scales import Scale

MIN = 60_000_000
SCALES_MIN = (5, 8, 10, 12, 15, 20, 30, 60, 180)


def record(name: str, seed: int, checkpoints: float, noise: float | None,
           recent_rate: bool = True, sigma: float | None = None) -> dict[str, np.ndarray]:
    changes: dict[str, float] = {"checkpoints": checkpoints} if checkpoints else {}
    if noise is not None:
        changes["progress_noise"] = noise
    if sigma is not None:
        changes["task_sigma"] = sigma
    scenario = SCENARIOS[name].scaled(**changes)
    sim = ClusterSim(scenario, seed)
    det = RunningTaskDetector(tuple(Scale(m * MIN) for m in SCALES_MIN), z_list=float("inf"), quiet_us=60 * MIN,
                              recent_rate=recent_rate)
    names = [node.name for node in sim.nodes]
    index = {n: i for i, n in enumerate(names)}
    end_us = round(scenario.hours * 3600e6)
    looks = list(range(MIN, end_us + 1, MIN))
    shape = (len(looks), len(names), len(SCALES_MIN))
    z, effect, tasks = np.zeros(shape, np.float32), np.zeros(shape, np.float32), np.zeros(shape, np.int32)
    log_ratio = np.zeros(shape, np.float32)
    k = 0
    for event in sim:
        while k < len(looks) and event.ts_us >= looks[k]:
            _look(det, looks[k], index, z[k], effect[k], tasks[k], log_ratio[k])
            k += 1
        if k >= len(looks):
            break
        observe_task(det, event)
    while k < len(looks):
        _look(det, looks[k], index, z[k], effect[k], tasks[k], log_ratio[k])
        k += 1
    spans = sim.ground_truth["slow_spans"]
    return {"z": z, "effect": effect, "tasks": tasks, "log_ratio": log_ratio, "ends": np.array(looks, np.int64),
            "nodes": np.array(names),
            "scales": np.array(SCALES_MIN), "spans": np.array(json.dumps(spans))}


def _look(det: RunningTaskDetector, end: int, index: dict[str, int], z: np.ndarray, effect: np.ndarray,
          tasks: np.ndarray, log_ratio: np.ndarray) -> None:
    det._log.apply_before(end)
    for node, tallies in det._tally(end, []).items():
        i = index[node]
        for j, t in enumerate(tallies):
            z[i, j], effect[i, j], tasks[i, j] = t.z, t.effect, t.tasks
            log_ratio[i, j] = t.scaled / t.information if t.information > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("scenario")
    parser.add_argument("seeds", type=int, nargs="+")
    parser.add_argument("--checkpoints", type=float, default=0.0)
    parser.add_argument("--noise", type=float, default=None)
    parser.add_argument("--mean-rate", action="store_true", help="project from the mean rate since the start")
    parser.add_argument("--sigma", type=float, default=None, help="the scenario's task_sigma (default: its own)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        if seed <= 10:
            raise SystemExit("seeds 1-10 are reported, never tuned on")
        began = time.perf_counter()
        suffix = f"-c{args.checkpoints:g}" if args.checkpoints else ""
        suffix += "-mean" if args.mean_rate else ""
        suffix += f"-s{args.sigma:g}" if args.sigma is not None else ""
        np.savez_compressed(args.out / f"{args.scenario}-{seed}{suffix}.npz",
                            **record(args.scenario, seed, args.checkpoints, args.noise, not args.mean_rate, args.sigma))
        print(f"{args.scenario} {seed}{suffix}: {time.perf_counter() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
