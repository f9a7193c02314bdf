"""The scenario suite at the within-job task spread of Google 2011's own tasks (issue 21, session 10).

Usage: PYTHONPATH=. python scripts/google_spread.py measure
       PYTHONPATH=. python scripts/google_spread.py run SCENARIO[,SCENARIO...] SEEDS [SIGMA]

``measure`` reads Google 2011 parts 0-9 (LAGGARD_TRACES_DIR) and prints, over the jobs with at least 10 SUCCEEDED
tasks, the within-job standard deviation of log duration: per job (quantiles) and weighted by tasks. On session 10's
run: 1,026 jobs, 211,532 tasks; per-job median 0.085 (quartiles 0.024 / 0.249), task-weighted median 0.22.

``run`` scores the named suite scenarios with ``task_sigma`` set to SIGMA (default 0.22, the task-weighted median
above) instead of the generator's 0.5, open loop, ``--policy running --period 60``, two processes; one JSON row per
scenario (the columns of ``laggard scenarios --json``'s rows). Nothing is tuned here: the spread comes from the
trace, the detector is the shipped one.

Why: session 7's information bound (docs/scenarios.md) puts a 2x node's listing at 16-21 minutes at zero chance
listings *at the suite's spread of 0.5*: one finished task carries delta^2 / (2 sigma^2) nats, so at Google's 0.22 it
carries about 5x as much, and the bound falls to a few minutes.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict

import orjson

from laggard.bench.common import google_events_spec
from laggard.bench.scenarios import run_suite, summarise
from producers.registry import open_trace
from producers.scenario_suite import SCENARIOS
from streams.core.events import Status, TaskFinish, TaskStart
from streams.settings import Settings

GOOGLE_TASK_SIGMA = 0.22
MIN_TASKS = 10


def within_job_spreads() -> list[tuple[float, int]]:
    """(standard deviation of log duration, tasks) of every job with at least MIN_TASKS succeeded tasks."""
    starts: dict[tuple[str, str, int], int] = {}
    logs: dict[str, list[float]] = defaultdict(list)
    for event in open_trace(google_events_spec(Settings())):
        if isinstance(event, TaskStart):
            starts[(event.job_id, event.task_id, event.attempt)] = event.ts_us
        elif isinstance(event, TaskFinish):
            started = starts.pop((event.job_id, event.task_id, event.attempt), None)
            if started is not None and event.status is Status.SUCCEEDED and event.ts_us > started:
                logs[event.job_id].append(math.log((event.ts_us - started) / 1e6))
    return [(statistics.pstdev(v), len(v)) for v in logs.values() if len(v) >= MIN_TASKS]


def measure() -> dict[str, object]:
    spreads = sorted(within_job_spreads())
    sigmas = [s for s, _ in spreads]
    half, seen, weighted = sum(n for _, n in spreads) / 2, 0, math.nan
    for sigma, tasks in spreads:
        seen += tasks
        if seen >= half:
            weighted = sigma
            break
    quantiles = {q: round(sigmas[int(q * len(sigmas))], 3) for q in (0.1, 0.25, 0.5, 0.75, 0.9)}
    return {"jobs": len(spreads), "tasks": sum(n for _, n in spreads), "per_job_quantiles": quantiles,
            "task_weighted_median": round(weighted, 3)}


def run(names: list[str], seeds: list[int], sigma: float) -> None:
    chosen = [SCENARIOS[name].scaled(name=f"{name}-gspread", task_sigma=sigma) for name in names]
    overrides = {"policy": "running", "ranking_period_s": 60.0}
    results = run_suite(chosen, seeds, ["open"], overrides, 2, lambda line: print(line, file=sys.stderr))
    for row in summarise(results):
        print(orjson.dumps(row).decode())


def main(argv: list[str]) -> None:
    if argv[:1] == ["measure"]:
        print(orjson.dumps(measure(), option=orjson.OPT_NON_STR_KEYS).decode())
    elif argv[:1] == ["run"] and len(argv) in (3, 4):
        seeds = [int(s) for s in argv[2].split(",")]
        run(argv[1].split(","), seeds, float(argv[3]) if len(argv) == 4 else GOOGLE_TASK_SIGMA)
    else:
        sys.exit(__doc__.split("\n\n")[1] if __doc__ else "usage: measure | run SCENARIOS SEEDS [SIGMA]")


if __name__ == "__main__":
    main(sys.argv[1:])
