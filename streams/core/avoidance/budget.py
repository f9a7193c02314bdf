"""A refusal budget: the adviser refuses only while the share of recent placements it refused stays within it.

A fixed threshold on expected z refuses in proportion to a cluster's load: set so that the heaviest cluster
stays within an operator's limit, it leaves lighter clusters refusing far less (and missing stragglers they
could have avoided). The budget is the operator's limit itself, like the blacklist's cap: over a sliding
window of recent placement decisions -- the last ``window`` decisions, or those of the last ``window_us`` of
event time -- a refusal is allowed only if, counting it, the refused share stays at most ``share`` (or it
is the window's only refusal: a cold start may refuse once). When the budget is spent the placement is
allowed and the adviser says so.

Pure and deterministic: time is the event time the caller passes; ``snapshot`` / ``restore`` keep the window
across restarts (beside the node-status tracker's snapshot).

>>> budget = RefusalBudget(share=0.25, window=4)
>>> [budget.decide(ts, True) for ts in range(8)]   # a refusal wanted at every placement
[True, False, False, False, True, False, False, False]
>>> budget.words()
'budget spent: 1 of the last 4 placements refused (at most 25.0 % of the last 4 placements, or one)'
>>> RefusalBudget.restore(budget.snapshot()).can_refuse(9) == budget.can_refuse(9)
True
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

BUDGET_FORMAT = "laggard-refusal-budget/1"
DEFAULT_SHARE = 0.10
DEFAULT_WINDOW = 3000  # placements (on tuning seeds 100-104: 1000 binds bursts of load too tightly)


class RefusalBudget:
    """At most ``share`` of the last ``window`` placements (or of those in the last ``window_us``) refused."""

    def __init__(self, share: float = DEFAULT_SHARE, window: int | None = DEFAULT_WINDOW,
                 window_us: int | None = None) -> None:  # fmt: skip
        if not 0.0 <= share <= 1.0:
            raise ValueError("share must be within 0 and 1")
        if (window is None) == (window_us is None):
            raise ValueError("give one of window (placements) and window_us (event time)")
        if (window is not None and window < 1) or (window_us is not None and window_us < 1):
            raise ValueError("the window must be positive")
        self.share, self.window, self.window_us = share, window, window_us
        self._decisions: deque[tuple[int, bool]] = deque()
        self._refused = 0

    def _evict(self, ts_us: int) -> None:
        if self.window_us is not None:
            while self._decisions and self._decisions[0][0] <= ts_us - self.window_us:
                self._refused -= self._decisions.popleft()[1]
        else:
            assert self.window is not None
            while len(self._decisions) >= self.window:
                self._refused -= self._decisions.popleft()[1]

    def can_refuse(self, ts_us: int) -> bool:
        """Would one more refusal at ``ts_us`` keep the refused share within the budget?"""
        self._evict(ts_us)  # what a record at ts_us drops first: the same whether or not one follows
        if self.share <= 0.0:
            return False
        # a window without refusals may always refuse once: a cold start is not a spent budget
        return self._refused + 1 <= max(self.share * (len(self._decisions) + 1), 1.0) + 1e-9

    def record(self, ts_us: int, refused: bool) -> None:
        """One placement decision at ``ts_us`` (event time, not decreasing), refused or not."""
        self._evict(ts_us)
        self._decisions.append((ts_us, refused))
        self._refused += refused

    def place(self, ts_us: int, value: float | None, wanted: bool, floor: float = -math.inf) -> bool:
        """``decide``, given the placement's expected value and floor too (which a first-come budget ignores)."""
        return self.decide(ts_us, wanted)

    def decide(self, ts_us: int, wanted: bool) -> bool:
        """Record one placement whose refusal is ``wanted``; True when it is refused (within the budget)."""
        refused = wanted and self.can_refuse(ts_us)
        self.record(ts_us, refused)
        return refused

    def window_words(self) -> str:
        if self.window_us is not None:
            return f"{_duration(self.window_us)} of placements"
        return f"{self.window} placements"

    def limit_words(self) -> str:
        """``10.0 % of the last 3000 placements`` (the share it allows)."""
        return f"{100 * self.share:.1f} % of the last {self.window_words()}"

    def words(self) -> str:
        """``budget spent: 300 of the last 3000 placements refused (at most 10.0 % of the last 3000 placements,
        or one)``: what it refused, then what it allows (it said "10.0 % ... refused" after one of one)."""
        kept = len(self._decisions)
        allows = f"at most {self.limit_words()}, or one" if self.share > 0 else "a share of 0 refuses none"
        return f"budget spent: {self._refused} of the last {kept} placement{'s' * (kept != 1)} refused ({allows})"

    @property
    def refused_share(self) -> float:
        """The refused share over the decisions kept now."""
        return self._refused / len(self._decisions) if self._decisions else 0.0

    def snapshot(self) -> dict[str, Any]:
        """The budget and its window as a JSON-ready document (``restore`` reads it back)."""
        return {"format": BUDGET_FORMAT, "share": self.share, "window": self.window, "window_us": self.window_us,
                "decisions": [[ts, int(r)] for ts, r in self._decisions]}  # fmt: skip

    @classmethod
    def restore(cls, document: dict[str, Any]) -> RefusalBudget:
        """The budget a ``snapshot`` was taken of; ``ValueError`` when the document is not one."""
        if not isinstance(document, dict) or document.get("format") != BUDGET_FORMAT:
            raise ValueError(f"not a refusal-budget snapshot (format {BUDGET_FORMAT!r} expected)")
        try:
            window, window_us = document["window"], document["window_us"]
            budget = cls(float(document["share"]), None if window is None else int(window),
                         None if window_us is None else int(window_us))  # fmt: skip
            for ts, refused in document["decisions"]:
                budget._decisions.append((int(ts), bool(refused)))
                budget._refused += bool(refused)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a refusal-budget snapshot: {exc!r}") from None
        return budget


class Budget(Protocol):
    """A running budget: ``RefusalBudget`` (first come, first served), ``RankedBudget`` (the worst first) or
    ``EscalatingBudget`` (a threshold that climbs as it fills)."""

    share: float

    def place(self, ts_us: int, value: float | None, wanted: bool, floor: float = ...) -> bool: ...


def refusals(predictions: Sequence[float | None], task_types: Sequence[str], starts: Sequence[int],
             thresholds: Mapping[str, float], budget: Budget | None) -> list[bool]:  # fmt: skip
    """Which placements are refused, taken in ``starts`` order (event time; ties in the given order): those
    whose expected value exceeds their type's threshold, while ``budget`` (if any) pays for them.

    >>> refusals([2.0, 2.0, 0.0, 2.0], ["a"] * 4, [0, 1, 2, 3], {"a": 1.0}, RefusalBudget(0.5, window=4))
    [True, False, False, True]
    """
    wanted = [p is not None and p > thresholds.get(kind, math.inf)
              for p, kind in zip(predictions, task_types, strict=True)]  # fmt: skip
    if budget is None:
        return wanted
    refused = [False] * len(wanted)
    for index in sorted(range(len(wanted)), key=lambda i: starts[i]):
        floor = thresholds.get(task_types[index], math.inf)
        refused[index] = budget.place(starts[index], predictions[index], wanted[index], floor)
    return refused


BudgetFactory = Callable[[], Budget]


def _duration(us: int) -> str:
    seconds = us / 1e6
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def parse_window(text: str) -> tuple[int | None, int | None]:
    """``1000`` -> (1000 placements, None); ``2h``, ``30m``, ``90s`` -> (None, event-time microseconds).

    >>> parse_window("1000"), parse_window("2h"), parse_window("30m")
    ((1000, None), (None, 7200000000), (None, 1800000000))
    """
    text = text.strip().lower()
    units = {"h": 3600, "m": 60, "s": 1}
    if text and text[-1] in units:
        value = float(text[:-1])
        if value <= 0:
            raise ValueError("the window must be positive")
        return None, round(value * units[text[-1]] * 1_000_000)
    count = int(text)
    if count < 1:
        raise ValueError("the window must be positive")
    return count, None
