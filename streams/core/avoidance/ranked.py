"""A ranked refusal budget: spend refusals on the worst placements of the recent past, not on the first.

The first-come-first-served ``RefusalBudget`` spends itself in a burst of load on the first mild refusals and
lets worse ones through. ``RankedBudget`` refuses a placement only when its expected value is among the worst
``share x safety`` of the expected values of the last ``window`` placements (a sliding window of predictions,
allowed ones included): above that window's ``1 - share x safety`` quantile, and above its type's floor
(thresholds chosen on tuning clusters). A ``RefusalBudget`` of the same share stays behind it as a hard cap.
Placements without a prediction are not ranked, but they count for the cap.

Pure and deterministic (the caller passes event time); ``snapshot`` / ``restore`` keep both windows.

>>> budget = RankedBudget(share=0.25, safety=1.0, window=8, cap_window=8)
>>> mild = [budget.place(ts, 0.5, True) for ts in range(8)]   # eight mild placements above the floor
>>> sum(mild) <= 2
True
>>> budget.place(8, 3.0, True)   # a bad one: above the window's 75th percentile, the cap can pay
True
>>> budget.place(9, 0.4, True)   # a mild one after it: below the quantile
False
>>> RankedBudget.restore(budget.snapshot()).snapshot() == budget.snapshot()
True
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from typing import Any

from streams.core.avoidance.budget import DEFAULT_SHARE, DEFAULT_WINDOW, RefusalBudget

RANKED_FORMAT = "laggard-ranked-budget/1"
ESCALATING_FORMAT = "laggard-escalating-budget/1"
DEFAULT_SAFETY = 0.9
DEFAULT_RANK_WINDOW = 1000  # predictions ranked against


class RankedBudget:
    """Refuse the worst ``share x safety`` of the last ``window`` predictions, capped at ``share`` refused."""

    def __init__(self, share: float = DEFAULT_SHARE, safety: float = DEFAULT_SAFETY,
                 window: int = DEFAULT_RANK_WINDOW, cap_window: int = DEFAULT_WINDOW) -> None:  # fmt: skip
        if not 0.0 < safety <= 1.0:
            raise ValueError("safety must be within 0 (excluded) and 1")
        if window < 1:
            raise ValueError("the window must be positive")
        self.cap = RefusalBudget(share, window=cap_window)
        self.share, self.safety, self.window = share, safety, window
        self._recent: deque[float] = deque()
        self._sorted: list[float] = []

    def quantile(self) -> float:
        """The expected value a placement must exceed now (the window's ``1 - share x safety`` quantile;
        -inf while the window is empty: the floor alone decides)."""
        if not self._sorted:
            return -math.inf
        q = 1.0 - self.share * self.safety
        position = q * (len(self._sorted) - 1)  # linear interpolation, as numpy.quantile's default
        low = math.floor(position)
        high = min(low + 1, len(self._sorted) - 1)
        return self._sorted[low] + (self._sorted[high] - self._sorted[low]) * (position - low)

    def place(self, ts_us: int, value: float | None, wanted: bool, floor: float = -math.inf) -> bool:
        """One placement at ``ts_us`` with expected ``value`` (None: no prediction), ``wanted`` when it is above
        its type's floor; True when it is refused. The value joins the window afterwards."""
        ranked = wanted and value is not None and value > self.quantile()
        refused = self.cap.decide(ts_us, ranked)
        if value is not None:
            if len(self._recent) >= self.window:
                old = self._recent.popleft()
                del self._sorted[bisect.bisect_left(self._sorted, old)]
            self._recent.append(value)
            bisect.insort(self._sorted, value)
        return refused

    def words(self) -> str:
        """What a refused-or-allowed reason says about the budget."""
        return (f"ranked budget: worst {100 * self.share * self.safety:.1f} % of the last {self.window} "
                f"placements (above {self.quantile():+.2f}), at most {100 * self.share:.1f} % of the last "
                f"{self.cap.window_words()} refused")  # fmt: skip

    def snapshot(self) -> dict[str, Any]:
        """Both windows as a JSON-ready document (``restore`` reads it back)."""
        return {"format": RANKED_FORMAT, "safety": self.safety, "window": self.window,
                "recent": list(self._recent), "cap": self.cap.snapshot()}  # fmt: skip

    @classmethod
    def restore(cls, document: dict[str, Any]) -> RankedBudget:
        """The budget a ``snapshot`` was taken of; ``ValueError`` when the document is not one."""
        if not isinstance(document, dict) or document.get("format") != RANKED_FORMAT:
            raise ValueError(f"not a ranked-budget snapshot (format {RANKED_FORMAT!r} expected)")
        try:
            cap = RefusalBudget.restore(document["cap"])
            if cap.window is None:
                raise ValueError("the cap's window must count placements")
            budget = cls(cap.share, float(document["safety"]), int(document["window"]), cap.window)
            budget.cap = cap
            for value in document["recent"][-budget.window:]:
                budget._recent.append(float(value))
            budget._sorted = sorted(budget._recent)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a ranked-budget snapshot: {exc!r}") from None
        return budget


class EscalatingBudget:
    """Refuse above the type's floor plus ``slope x fill ** 2``, where ``fill`` is the refused share of the
    last ``window`` decisions over ``share``: a light cluster refuses at its floor, a loaded one climbs.
    A ``RefusalBudget`` of the same share stays behind it as a hard cap.

    >>> budget = EscalatingBudget(share=0.25, slope=1.0, window=8, cap_window=8)
    >>> [budget.place(ts, 0.5, True, floor=0.0) for ts in range(8)]   # mild: the threshold climbs after a refusal
    [True, False, False, False, False, False, False, True]
    >>> budget.threshold_over_floor()   # the window's share refused is the budget's: one slope over the floor
    1.0
    >>> budget.place(8, 2.0, True, floor=0.0)   # a bad one is still worth a refusal
    True
    """

    def __init__(self, share: float = DEFAULT_SHARE, slope: float = 0.4, window: int = DEFAULT_RANK_WINDOW,
                 cap_window: int = DEFAULT_WINDOW) -> None:  # fmt: skip
        if slope < 0 or window < 1:
            raise ValueError("the slope must be at least 0 and the window positive")
        self.cap = RefusalBudget(share, window=cap_window)
        self.share, self.slope, self.window = share, slope, window
        self._recent: deque[bool] = deque()
        self._refused = 0

    def threshold_over_floor(self) -> float:
        """How far above its type's floor a placement must be expected now."""
        if not self._recent or self.share <= 0.0:
            return 0.0
        fill = self._refused / len(self._recent) / self.share
        return self.slope * fill**2

    def place(self, ts_us: int, value: float | None, wanted: bool, floor: float = -math.inf) -> bool:
        """One placement; ``wanted`` when ``value`` is above ``floor`` (its type's). True when refused."""
        climbing = wanted and value is not None and value - floor > self.threshold_over_floor()
        refused = self.cap.decide(ts_us, climbing)
        self._recent.append(refused)
        self._refused += refused
        if len(self._recent) > self.window:
            self._refused -= self._recent.popleft()
        return refused

    def words(self) -> str:
        return (f"escalating budget: {self.threshold_over_floor():+.2f} over the floor, at most "
                f"{100 * self.share:.1f} % of the last {self.cap.window_words()} refused")  # fmt: skip

    def snapshot(self) -> dict[str, Any]:
        """Both windows as a JSON-ready document (``restore`` reads it back)."""
        return {"format": ESCALATING_FORMAT, "slope": self.slope, "window": self.window,
                "recent": [int(r) for r in self._recent], "cap": self.cap.snapshot()}  # fmt: skip

    @classmethod
    def restore(cls, document: dict[str, Any]) -> EscalatingBudget:
        """The budget a ``snapshot`` was taken of; ``ValueError`` when the document is not one."""
        if not isinstance(document, dict) or document.get("format") != ESCALATING_FORMAT:
            raise ValueError(f"not an escalating-budget snapshot (format {ESCALATING_FORMAT!r} expected)")
        try:
            cap = RefusalBudget.restore(document["cap"])
            budget = cls(cap.share, float(document["slope"]), int(document["window"]), cap.window or DEFAULT_WINDOW)
            budget.cap = cap
            for refused in document["recent"][-budget.window:]:
                budget._recent.append(bool(refused))
                budget._refused += bool(refused)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not an escalating-budget snapshot: {exc!r}") from None
        return budget
