"""The load model of the synthetic cluster (key ``load=F``): durations that depend on a node's load at entry.

Off by default (``load=0``): the cluster's events are then exactly those it always generated. With ``load > 0``:

* every job gets a type, ``compute`` or ``memory`` (half each), and per-task requests as Google 2011's
  task_events carry them, in units of one node's capacity: a compute job asks ``U(0.05, 0.30)`` CPU and
  ``U(0.02, 0.10)`` memory per task, a memory job ``U(0.02, 0.10)`` CPU and ``U(0.10, 0.40)`` memory.
  ``TaskStart`` carries them (``task_type``, ``cpu_request``, ``memory_request``).
* a task placed on a node where the requests of the attempts already running plus its own exceed the node's
  capacity (1.0) is slowed: its work is stretched by ``1 + load * over``, ``over`` the excess of the resource
  its job type is bound by (CPU for compute, memory for memory jobs). The stretch is fixed at entry (the
  task does not speed up when its neighbours leave), which is what a placement-time adviser can know.
* a job's tasks are generated in start order, so each sees the attempts that started before it. Missed: a
  task of a later job that starts earlier (jobs arriving within the 2-second launch spread) -- rare noise.

The requests and types are drawn from their own random stream, so placements and nominal work are the same
as without the model: only durations differ.

>>> model = NodeLoad(load=2.0, seed=1)
>>> kind, cpu, memory = model.job_profile()
>>> kind, round(cpu, 3), round(memory, 3)
('compute', 0.292, 0.087)
>>> model.add(node=0, start_us=0, end_us=100, cpu=0.9, memory=0.1)
>>> model.stretch(node=0, at_us=50, task_type="compute", cpu=0.3, memory=0.1)  # 1 + 2 * (0.9 + 0.3 - 1)
1.4...
>>> model.stretch(node=0, at_us=100, task_type="compute", cpu=0.3, memory=0.1)  # the first task has ended
1.0
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

JOB_TYPES = ("compute", "memory")
_CPU = {"compute": (0.05, 0.30), "memory": (0.02, 0.10)}
_MEMORY = {"compute": (0.02, 0.10), "memory": (0.10, 0.40)}


@dataclass(slots=True)
class _Interval:
    start_us: int
    end_us: int
    cpu: float
    memory: float


@dataclass
class NodeLoad:
    """Requests of the attempts placed on each node, and the stretch they impose on a newcomer."""

    load: float
    seed: int
    _intervals: dict[int, list[_Interval]] = field(default_factory=dict)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.seed}/load")

    def job_profile(self) -> tuple[str, float, float]:
        """A new job's (type, CPU request, memory request) per task."""
        kind = self._rng.choice(JOB_TYPES)
        return kind, self._rng.uniform(*_CPU[kind]), self._rng.uniform(*_MEMORY[kind])

    def stretch(self, node: int, at_us: int, task_type: str, cpu: float, memory: float) -> float:
        """How much longer a task of ``task_type`` asking ``cpu``/``memory`` takes on ``node`` from ``at_us``."""
        running = [i for i in self._intervals.get(node, ()) if i.start_us <= at_us < i.end_us]
        bound = "memory" if task_type == "memory" else "cpu"  # the resource the job type is bound by
        demand = (memory if bound == "memory" else cpu) + sum(getattr(i, bound) for i in running)
        return 1.0 + self.load * max(0.0, demand - 1.0)

    def add(self, node: int, start_us: int, end_us: int, cpu: float, memory: float) -> None:
        """An attempt runs on ``node`` in [start_us, end_us)."""
        self._intervals.setdefault(node, []).append(_Interval(start_us, end_us, cpu, memory))

    def forget_before(self, ts_us: int) -> None:
        """Drop attempts that ended before ``ts_us``: no later start can overlap them."""
        for node, intervals in self._intervals.items():
            self._intervals[node] = [i for i in intervals if i.end_us > ts_us]
