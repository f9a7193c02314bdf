"""Censored scores whatever the job codes (issue 18, session 18 review): the task table numbers jobs as it meets them
and renumbers only when it compacts, so at 100 k nodes its codes passed what one packed sort key holds; from 2^21 on
the lookup keys overflowed and the scores were wrong without a sign."""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.detection import censored
from streams.core.detection.censored import task_scores

MINUTE = 60_000_000


def tasks(jobs: int, per_job: int = 8, seed: int = 1) -> tuple[np.ndarray, ...]:
    """Jobs of ``per_job`` tasks, a fifth of them still running at the boundary (3 h)."""
    rng = np.random.default_rng(seed)
    n = jobs * per_job
    job = np.repeat(np.arange(jobs, dtype=np.int64), per_job)
    starts = rng.integers(0, 120 * MINUTE, n).astype(np.int64)
    times = (rng.lognormal(0.0, 0.5, n) * 10 * MINUTE).astype(np.int64)
    finished = rng.random(n) > 0.2
    return job, starts, np.where(finished, times, 180 * MINUTE - starts), finished


@pytest.mark.parametrize("offset", [(1 << 20) - 5, (1 << 21) - 100, (1 << 40) + 3])  # the middle one straddles 2^21
def test_large_job_codes_score_as_the_same_jobs_numbered_from_zero(offset: int) -> None:
    job, starts, times, finished = tasks(40)
    dense = task_scores(job, starts, times, finished, 180 * MINUTE)
    spread = task_scores(job * 7 + offset, starts, times, finished, 180 * MINUTE)  # same order, sparse and large
    for a, b in zip(dense, spread, strict=True):
        assert np.array_equal(a, b)


def test_more_jobs_than_a_key_holds_are_scored_a_range_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    job, starts, times, finished = tasks(40)
    whole = task_scores(job, starts, times, finished, 180 * MINUTE)
    monkeypatch.setattr(censored, "_JOB_BITS", 3)  # 8 jobs to a key: 40 jobs take five ranges
    ranged = task_scores(job, starts, times, finished, 180 * MINUTE)
    # equal but for rounding: a job's survival curve is a difference of running sums over all the jobs before it
    np.testing.assert_allclose(ranged[0], whole[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(ranged[1], whole[1], rtol=0, atol=1e-9)
    assert np.array_equal(ranged[2], whole[2])
    assert np.abs(whole[0]).max() > 0.5  # the scores say something: not all zero
