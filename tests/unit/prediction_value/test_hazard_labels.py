"""``hazard`` learns one labelled example per checkpoint of a finished task, and nothing from a task finished
without a checkpoint (session 16: such finishes no longer compute tau, which changed no example)."""

from __future__ import annotations

import math
from typing import Any

from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import step
from streams.core.prediction.hazard import HazardMethod
from streams.core.prediction.threshold import JobP90

S = 1_000_000


class Recorder:
    """A classifier that never flags and keeps every example it is taught."""

    def __init__(self) -> None:
        self.examples: list[tuple[dict[Any, Any], bool]] = []

    def clone(self) -> Recorder:
        return self

    def predict_proba_one(self, x: dict[Any, Any]) -> dict[bool, float]:
        return {True: 0.0}

    def learn_one(self, x: dict[Any, Any], y: bool) -> None:
        self.examples.append((x, y))


def finish(task: str, seconds: int, at: int) -> TaskFinish:
    return TaskFinish("j", task, 0, "n1", at * S, seconds * S, Status.SUCCEEDED)


def checkpoint(task: str, elapsed: int, at: int) -> TaskCheckpoint:
    return TaskCheckpoint("j", task, 0, "n1", at * S, elapsed * S, {})


def test_only_the_checkpoints_of_finished_tasks_become_examples_labelled_by_the_in_time_rule() -> None:
    recorder = Recorder()
    method = HazardMethod(p=0.5, nodes=0, initial_fraction=0.1, classifier=recorder)
    job = method.job("j", JobP90())
    events = [JobStart("j", 0, declared_tasks=10),
              *(finish(str(t), 10, 10) for t in range(5)),  # no checkpoint: nothing to label
              checkpoint("9", 12, 12), checkpoint("5", 5, 15), checkpoint("9", 20, 20),
              finish("5", 10, 20),  # its checkpoint at 5 s: not a straggler
              *(finish(str(t), 10, 20) for t in (6, 7, 8)),
              finish("9", 100, 100)]  # tau is the p90 of [10] * 9 + [100], 100 s: a straggler; 12 + 10 < 100
    for event in events:
        step(method, job, event)
    # elapsed over the job's median then (10 s), and the label, of task 5's checkpoint, then task 9's two
    assert [(x["log_elapsed_rel"], y) for x, y in recorder.examples] == [
        (math.log(0.5), False), (math.log(1.2), True), (math.log(2.0), True)]
    assert job.threshold.value() == 100.0 and job._median() == 10.0  # every finish counted in tau and the median
