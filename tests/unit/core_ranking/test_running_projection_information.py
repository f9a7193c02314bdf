"""A running task whose progress report projects its duration scores as if it had ended then, and carries the
information of a task that has ended (h61). Before, its censoring point stayed at its elapsed time: where no sibling had
finished yet (a cold start, a young job) the survival curve there is 1, the information about 4e-14, while the
contribution is its projected score, O(1). A node of such tasks read an effect of 1e13 job std and a mean log ratio of
2.8e12 (the OverflowError of CI at 92fcd13; session 14 in docs/scenarios.md)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from streams.core.detection.base import WindowView
from streams.core.detection.censored import task_scores
from streams.core.detection.running import RunningTaskDetector
from streams.core.detection.scales import Scale
from streams.core.events import TaskCheckpoint, TaskStart

MIN = 60_000_000


def test_a_projected_task_carries_the_information_of_a_task_that_ended_at_its_projection() -> None:
    # One job, every task still running at B = 100; three report progress projecting past every elapsed time.
    jobs = np.zeros(6, dtype=np.int64)
    starts = np.array([0, 0, 0, 0, 10, 20], dtype=np.int64)
    times = np.array([150, 200, 260, 100, 90, 80], dtype=np.int64)  # projected (first three) or elapsed
    known = np.array([True, True, True, False, False, False])
    x, v, _ = task_scores(jobs, starts, times, known, boundary_us=100)
    as_ended_x, as_ended_v, _ = task_scores(jobs, starts, times, known, boundary_us=260)  # all three have ended
    assert np.allclose(x[:3], as_ended_x[:3]) and np.all(v[:3] > 0.1)
    assert np.all(v[:3] <= as_ended_v[:3] + 1e-12)  # never more than once they have ended
    assert np.all(np.abs(x / np.where(v > 0, v, 1.0)) < 8.0)  # no task alone an effect past the scores' range


def test_a_healthy_cluster_with_progress_reports_reads_no_enormous_effect_before_its_first_task_ends() -> None:
    """20 alike nodes start 3 tasks each of one job at minute 0, of 3.5 minutes or more (about 6); every task reports
    its progress at 1 and 2 minutes. At minute 3, before any task ended (each projected past every elapsed time), no
    node's evidence says it is slow: its score, the effect less two standard errors, is below 0.5 job std (before:
    about 1e13), and none is suspected."""
    rng = random.Random(1)
    det = RunningTaskDetector((Scale(15 * MIN),), z_list=4.0, min_tasks=3)
    for k in range(20):
        for i in range(3):
            task, node, start = f"{k}-{i}", f"n{k}", k * 1000 + i
            det.observe(TaskStart("j", task, 0, node, start))
            duration = max(3.5 * MIN, rng.lognormvariate(math.log(6 * MIN), 0.3))
            for minute in (1, 2):
                elapsed = minute * MIN - start
                det.observe(TaskCheckpoint("j", task, 0, node, minute * MIN, elapsed,
                                           {"progress": min(0.95, elapsed / duration)}))
    evidence = det.detect(WindowView(0, 3 * MIN, {}))
    assert len(evidence) == 20
    assert max(e.score for e in evidence.values()) < 0.5
    assert not any(e.suspect for e in evidence.values())


def _null_variance(c: np.ndarray) -> np.ndarray:
    """``V(c)`` of ``censored``'s module text: the variance of a contribution censored at ``c``, increasing in ``c``."""
    pdf, cdf = stats.norm.pdf(c), stats.norm.cdf(c)
    return cdf - c * pdf + pdf * pdf / stats.norm.sf(c)


@pytest.mark.parametrize("seed", range(40))
def test_a_known_task_never_carries_less_information_than_its_own_score_gives(seed: int) -> None:
    """Finished and projected tasks alike: a known task's censoring point is at or above its score, so its information
    is at least ``V(score)``; where it was not (a projection censored at its elapsed time), one task's effect was
    without bound."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    jobs = rng.integers(0, 3, n).astype(np.int64)
    starts = rng.integers(0, 1000, n).astype(np.int64)
    boundary = 1200
    durations = np.round(np.exp(rng.normal(np.log(300), 0.6, n))).astype(np.int64)
    finished = starts + durations < boundary
    projected = ~finished & (rng.random(n) < 0.5)  # a report projected its duration (never below its elapsed time)
    times = np.where(finished, durations, boundary - starts)
    times = np.where(projected, np.maximum(times, np.round(durations * np.exp(rng.normal(0, 0.2, n)))), times)
    known = finished | projected
    x, v, _ = task_scores(jobs, starts, times.astype(np.int64), known, boundary)
    assert np.all(v[known] >= _null_variance(x[known]) - 1e-9)
