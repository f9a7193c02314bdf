"""Splitting each method's old ``observe`` into ``predict`` and ``learn`` changed no flag.

``golden_flags.json`` holds every flag (event index, task, times, predictions, threshold, weight) each method
raised on a real Google job with main's ``observe`` code before the split (commit c9880e9): the flagged tasks in
order and the records; driving the new verbs with ``step`` must give the same records. Integers and strings are
compared exactly, floats to 1e-9: nurd-batch's scikit-learn refits differ in their last bits between OpenBLAS
kernels (the golden's SHA-256 holds under the Haswell kernel where it was made; a SkylakeX machine's AVX-512
kernel moved the prediction floats by 1e-14 relative and failed a byte-for-byte hash).
nurd-batch runs on a prefix of the job (refits are slow).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from producers.readers.google_usage import read_usage
from streams.core.evaluation.prediction import job_truth
from streams.core.events import Event, TaskFinish
from streams.core.prediction.base import PredictionContext, step
from streams.core.prediction.registry import build_method
from streams.core.prediction.threshold import JobP90, Oracle

GOLDEN = json.loads((Path(__file__).parent / "golden_flags.json").read_text())


@pytest.fixture(scope="module")
def events(traces_dir: Path) -> list[Event]:
    return list(read_usage(traces_dir / "google2011-nurd-timeseries" / "timeseriesspecsixtotal" / GOLDEN["job"]))


def _records(name: str, thr: str, alpha: float, events: list[Event]) -> list[list[object]]:
    context = PredictionContext(params={"nurd_alpha": alpha, "nurd_epsilon": 0.05})
    truth = job_truth(events, context.initial_fraction)
    if name == "nurd-batch":
        events = events[: [i for i, e in enumerate(events) if isinstance(e, TaskFinish)][9] + 60]
    method = build_method(name, context)
    job = method.job(GOLDEN["job"], Oracle(truth.tau_s) if thr == "oracle" else JobP90())
    records = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's convergence chatter on tiny refits
        for i, event in enumerate(events):
            f = step(method, job, event)
            if f is not None:
                records.append([i, f.task_id, f.ts_us, f.elapsed_us, f.predicted_us, f.adjusted_us, f.threshold_us,
                                f.weight, f.method])  # fmt: skip
    return records


@pytest.mark.parametrize("key", sorted(GOLDEN["flags"]))
def test_step_gives_the_flags_observe_gave(key: str, events: list[Event]) -> None:
    name, thr, alpha = key.split("/")
    if name == "nurd-batch":
        pytest.importorskip("sklearn")
    want = GOLDEN["flags"][key]
    records = _records(name, thr, float(alpha.removeprefix("alpha")), events)
    assert [r[1] for r in records] == want["tasks"]
    assert len(records) == len(want["records"])
    for got, expected in zip(records, want["records"], strict=True):
        assert len(got) == len(expected), (got, expected)
        for field, value in zip(got, expected, strict=True):
            if isinstance(value, float):
                assert field == pytest.approx(value, rel=1e-9), (got, expected)
            else:
                assert field == value, (got, expected)
