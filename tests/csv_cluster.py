"""A generated task table in the csv: format, shared by the tests that rank one: 40 nodes n00-n39, one job
every ``every_s`` seconds (20-50 tasks of a log-normal size), tasks on the ``slow`` nodes take 1.8x."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator

HEADER = "job_id,task_id,node_id,start_us,end_us,status"


def cluster_rows(slow: Iterable[str], jobs: int, seed: int, every_s: int = 30, job_ids: Iterator[str] | None = None,
                 failures: bool = False) -> list[str]:  # fmt: skip
    """The header and one row per task; ``job_ids`` names the jobs (default j0, j1, ...); with ``failures`` about
    5 % of the attempts FAILED or KILLED."""
    rng = random.Random(seed)
    slow = set(slow)
    lines = [HEADER]
    for job in range(jobs):
        job_id = next(job_ids) if job_ids is not None else f"j{job}"
        arrival = 1 + job * every_s * 1_000_000
        size = 60 * math.exp(rng.gauss(0, 0.5))
        for task in range(rng.randint(20, 50)):
            node = f"n{rng.randrange(40):02d}"
            duration = int(size * rng.paretovariate(3.0) * (1.8 if node in slow else 1.0) * 1e6)
            status = "SUCCEEDED"
            if failures and rng.random() <= 0.05:
                status = rng.choice(["FAILED", "KILLED"])
            lines.append(f"{job_id},t{task},{node},{arrival},{arrival + duration},{status}")
    return lines
