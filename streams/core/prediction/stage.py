"""Prediction of one partition, whatever the interleaving of its two topics: a merge buffer before the predictors.

A partition's task events and job events arrive through two topics in any interleaving. Stepped in poll order,
the ``PredictorFleet`` forgets a job at a JobFinish read before the job's last task events, and those then build
a fresh predictor: flags published twice, or missed (issue 18: 500-2,000 events of skew between the topics
raised 6.5 % of the flags twice). And a method that learns from ended jobs moves at a different point among
the other jobs' checkpoints. So ``PredictStage`` steps the fleet in the order ``NormalizeStage`` applies events
in (``streams.core.merge``: time, then JobStart before task events before JobFinish, then each stream's own
order), once both streams have passed their time: the same flags for any interleaving.

The cost is time. A checkpoint is predicted on once the job stream has passed its time, so a flag comes as
late as the job stream lags behind the task stream: in a catch-up, the read skew between the two topics; live,
with job events only when jobs start and end, until the partition's next job event, or until the shell
declares the silent job stream idle (``mark_job_stream_idle``, the same wall-clock rule as the statistics'
``streams.agents.idle_rules``; ``holds_progress`` tells it when task events wait, ``job_events`` whether the job
stream still sends: a job stream that sends is late, not silent). A source without job events
(``wait_for_job_events`` off) waits for nothing until its first one; a trace read in event-time order in-process
(``time_ordered``) waits only for the events of its latest timestamp.

>>> from streams.core.events import JobFinish, JobStart, TaskCheckpoint
>>> from streams.core.prediction.fleet import PredictorFleet
>>> stage = PredictStage(PredictorFleet("spark-q0.75-m1.5"), wait_for_job_events=True)
>>> stage.process_batch([JobStart("j", 0), JobFinish("j", 50)])  # read before the job's task events: it waits
[]
>>> stage.process(TaskCheckpoint("j", "t0", 0, "n0", 10, 10, {})), stage.fleet.running_jobs, stage.holds_progress
([], 1, False)
>>> stage.process(TaskCheckpoint("j", "t1", 0, "n0", 60, 60, {})), stage.pending, stage.holds_progress
([], 2, True)
>>> _ = stage.mark_job_stream_idle(); stage.fleet.running_jobs, stage.pending  # JobFinish applied after t0 at 10
(0, 1)
"""

from __future__ import annotations

from typing import Any

from streams.core.events import Event, StragglerPrediction
from streams.core.merge import MergeBuffer
from streams.core.prediction.fleet import PredictorFleet

# 1: the merge buffer's held events and watermarks beside the fleet's snapshot. What the prediction agents saved
# before (the fleet's snapshot alone) is restored into the fleet with an empty merge buffer (``migrated``).
SNAPSHOT_VERSION = 1
KIND = "laggard.predict-stage"


class PredictStage:
    """``fleet`` (one partition's predictors) stepped in the merged order of the partition's events."""

    def __init__(self, fleet: PredictorFleet, partition: int = 0, wait_for_job_events: bool = False,
                 time_ordered: bool = False) -> None:
        self.fleet = fleet
        self.partition = partition
        self._merge = MergeBuffer(wait_for_job_events, time_ordered)

    @property
    def watermark(self) -> int:
        """Every event before this time has been stepped (-1: nothing yet)."""
        return self._merge.watermark

    @property
    def pending(self) -> int:
        """Events held until both streams pass their time."""
        return len(self._merge)

    @property
    def job_stream_idle(self) -> bool:
        return self._merge.job_stream_idle

    @property
    def job_stream_lag_us(self) -> int:
        """How far the task events have run ahead of what can be stepped (the job stream holds them back)."""
        return self._merge.job_stream_lag_us

    @property
    def job_events(self) -> int:
        """Job events received since made or restored: a change tells the shell's idle rule the stream sends."""
        return self._merge.job_events

    @property
    def holds_progress(self) -> bool:
        """Whether task events wait for the job stream (the shell's idle rule times such a wait)."""
        return self._merge.job_stream_lag_us > 0

    def process(self, event: Event) -> list[StragglerPrediction]:
        """Take one event; return the flags of the events it let through."""
        self._merge.receive(event)
        return self._step(self._merge.advance())

    def process_batch(self, events: list[Event]) -> list[StragglerPrediction]:
        """Take several events at once: the same flags as one ``process`` after the other."""
        for event in events:
            self._merge.receive(event)
        return self._step(self._merge.advance())

    def mark_job_stream_idle(self) -> list[StragglerPrediction]:
        """The job stream is silent (the shell's judgement): stop waiting for it until its next event."""
        self._merge.mark_job_stream_idle()
        return self._step(self._merge.advance())

    def flush(self) -> list[StragglerPrediction]:
        """End of a finite trace: step everything still held; the watermark stays past it (an event after the
        flush is stepped at once, as one behind the watermark always is)."""
        return self._step(self._merge.advance_past_all())

    def _step(self, before: int) -> list[StragglerPrediction]:
        flags = []
        for event in self._merge.release(before):
            flag = self.fleet.step(event)
            if flag is not None:
                flags.append(flag)
        return flags

    def snapshot(self) -> dict[str, Any]:
        return {"kind": KIND, "version": SNAPSHOT_VERSION, "merge": self._merge.snapshot(),
                "fleet": self.fleet.snapshot()}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from ``snapshot()``, or from what the prediction agents saved before their events were merged:
        the fleet's snapshot alone (``migrated``). Both parts are read into new objects first, so a snapshot of
        another kind, version or method, or a malformed one, is a ValueError that changes nothing: the caller
        starts cold."""
        fleet = PredictorFleet(self.fleet.method, self.fleet.context, self.fleet.job_idle_timeout_us)
        merge = MergeBuffer(self._merge.wait_for_job_events, self._merge.time_ordered)
        try:
            if migrated(state):
                fleet.restore(state)  # its version and method are checked: an older fleet is a cold start
            elif state.get("kind") == KIND and state.get("version") == SNAPSHOT_VERSION:
                fleet.restore(state["fleet"])
                merge.restore(state["merge"])
            else:
                raise ValueError(f"prediction snapshot {state.get('kind')!r} version {state.get('version')!r} is "
                                 f"not {KIND!r} version {SNAPSHOT_VERSION}")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed prediction snapshot ({type(exc).__name__}: {exc})") from exc
        self.fleet, self._merge = fleet, merge


def migrated(state: dict[str, Any]) -> bool:
    """Whether ``state`` is a prediction checkpoint from before the merge buffer: a ``PredictorFleet`` snapshot
    alone. That fleet stepped every event its checkpoint's offsets cover, in poll order, and held none back:
    it continues exactly with an empty merge buffer (the events after those offsets are merged from then on).

    >>> migrated({"version": 2, "method": "select", "cluster": None, "jobs": []}), migrated({"kind": KIND})
    (True, False)
    """
    return "kind" not in state and "jobs" in state and "method" in state


def predict_checkpoint_due_after(pending: int, every: int) -> int:
    """How many records a prediction state takes between checkpoints: ``every``, or half the events its merge
    buffer holds if more. A checkpoint writes every held event (about 49 bytes each); in a catch-up the buffer
    grows by what the job stream lags, and a checkpoint every ``every`` records rewrote it each time, a cost
    growing with the square of the backlog. Taking at least as many records as were held at the last checkpoint
    (``pending - held``, that is ``held >= pending / 2``) keeps the total written under twice what was read.

    >>> predict_checkpoint_due_after(300, 2000), predict_checkpoint_due_after(10_000, 2000)
    (2000, 5000)
    """
    return max(every, pending // 2)

