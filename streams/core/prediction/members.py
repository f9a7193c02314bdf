"""What a method made of member methods does with them alike (``anyof``, ``selector``): every member learns
every event, a restored job binds to its members' methods, and the members' cluster-level state is saved and
restored in order.

>>> from streams.core.prediction.registry import PredictionContext, build_method
>>> class Pair(MemberMethods):
...     def __init__(self) -> None:
...         self.members = [build_method(name, PredictionContext()) for name in ("spark-q0.75-m1.5", "hazard")]
>>> pair = Pair()
>>> saved = pair.members_snapshot()
>>> len(saved), saved[0] is None  # Spark's rule keeps no cluster-level state
(2, True)
>>> pair.restore_members(saved)
"""

from __future__ import annotations

from typing import Any

from streams.core.events import Event
from streams.core.prediction.base import PredictionMethod, StatefulMethod


class MemberMethods:
    """Mixin of a method holding ``members``; its job predictors hold one job predictor per member in order."""

    members: list[PredictionMethod]

    def learn(self, event: Event) -> None:
        for member in self.members:
            member.learn(event)

    def adopt(self, job: Any) -> None:
        """Bind a restored job predictor (and its members' job predictors) to this method."""
        job.owner = self
        for method, member in zip(self.members, job.members, strict=True):
            adopt = getattr(method, "adopt", None)
            if adopt is not None:
                adopt(member)

    def members_snapshot(self) -> list[object]:
        """Each member's cluster-level state (None for members that keep none)."""
        return [m.snapshot() if isinstance(m, StatefulMethod) else None for m in self.members]

    def restore_members(self, saved: list[object]) -> None:
        for method, state in zip(self.members, saved, strict=True):
            if state is not None and isinstance(method, StatefulMethod):
                method.restore(state)
