"""The options and their parsing that ``laggard advise``'s commands share (budget, calibration, threshold,
target, seeds): a wrong value is a usage error (click's exit 2) with one line naming the option, never a traceback."""

from __future__ import annotations

from typing import Any

import click

from streams.core.avoidance.budget import DEFAULT_SHARE, DEFAULT_WINDOW, RefusalBudget, parse_window
from streams.core.avoidance.calibration import (
    DEFAULT_BURST,
    DEFAULT_CALIBRATION_WINDOW,
    DEFAULT_LEAST,
    DEFAULT_TOP,
    CalibratedBudget,
)
from streams.core.avoidance.calibration import DEFAULT_SHARE as DEFAULT_RATE


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """``1-5`` or ``1,3,7`` -> seeds (a mistake is a usage error naming ``option``)."""
    try:
        if "-" in text:
            low, high = (int(part) for part in text.split("-", 1))
            seeds = list(range(low, high + 1))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"seeds must be LO-HI or a comma list of integers, not {text!r}",
                                 param_hint=option) from None
    if not seeds:  # "5-1" ran nothing and printed a mean over 0 seeds
        raise click.BadParameter(f"no seed in {text!r}: give LO-HI with LO <= HI, or a comma list", param_hint=option)
    return seeds


def budget_options(command: Any) -> Any:
    """``--budget-share`` and ``--budget-window``: the running refusal budget's settings."""
    command = click.option("--budget-window", default=str(DEFAULT_WINDOW), show_default=True,
                           help="the refusal budget's window: a count of placements (1000) or event time "
                                "(2h, 30m, 90s); off: no budget (query, serve)")(command)  # fmt: skip
    return click.option("--budget-share", type=click.FloatRange(0, 1), default=DEFAULT_SHARE, show_default=True,
                        help="refuse only while at most this share of the window's placements was refused")(command)


def calibrated_option(command: Any) -> Any:
    """``--calibrated`` and the calibration's settings, for query and serve."""
    command = calibration_options(command)
    return click.option("--calibrated", is_flag=True,
                        help="refuse by the online calibration (a request whose chance ranks in the --top share of "
                             "the recent requests, paid from a token bucket) instead of --budget-share/window; "
                             "--threshold is then a floor [default 0]")(command)  # fmt: skip


def calibration_options(command: Any) -> Any:
    """``--top``, ``--calibration-window``, ``--burst``: the online calibration's settings (chosen on the
    synthetic cluster's tuning seeds 100-119, ``advise calibrate``)."""
    command = click.option("--burst", type=click.FloatRange(min=1), default=DEFAULT_BURST, show_default=True,
                           help="calibrated: tokens the refusal bucket holds at most")(command)
    command = click.option("--calibration-window", type=click.IntRange(min=1), default=DEFAULT_CALIBRATION_WINDOW,
                           show_default=True, help="calibrated: recent requests a score is ranked among")(command)
    command = click.option("--rate", type=click.FloatRange(0, 1), default=DEFAULT_RATE, show_default=True,
                           help="calibrated: tokens the refusal bucket earns per request (its long-run refused "
                                "share at most)")(command)
    command = click.option("--least", type=click.FloatRange(0, 1), default=DEFAULT_LEAST, show_default=True,
                           help="calibrated: the top share refused with the token bucket empty")(command)
    return click.option("--top", type=click.FloatRange(0, 1), default=DEFAULT_TOP, show_default=True,
                        help="calibrated: refuse a request whose score ranks in this top share (with the token "
                             "bucket full; --least with it empty)")(command)


def checked_window(text: str, allow_off: bool = True) -> str:
    if allow_off and text.strip().lower() == "off":
        return "off"
    try:
        parse_window(text)
    except ValueError:
        raise click.BadParameter(f"a positive count or a duration like 2h, 30m, 90s{' or off' if allow_off else ''}, "
                                 f"not {text!r}", param_hint="--budget-window") from None
    return text


def make_budget(share: float, window: str, calibration: dict[str, Any] | None = None,
                ) -> RefusalBudget | CalibratedBudget | None:  # fmt: skip
    """The running refusal budget of query/serve: the online calibration when ``--calibrated`` gave its
    settings, else a first-come budget (None with ``--budget-window off``)."""
    if calibration is not None and calibration.pop("calibrated"):
        return CalibratedBudget(calibration["rate"], calibration["top"], calibration["calibration_window"],
                                calibration["burst"], least=calibration["least"])  # fmt: skip
    if checked_window(window) == "off":
        return None
    count, window_us = parse_window(window)
    return RefusalBudget(share, count, window_us)


def thresholds_text(threshold: float | dict[str, float]) -> str:
    """``+1.02``, or ``compute +0.85, memory +1.04`` for thresholds per type."""
    if isinstance(threshold, dict):
        return ", ".join(f"{kind} {value:+.2f}" for kind, value in sorted(threshold.items()))
    return f"{threshold:+.2f}"


def parse_threshold(text: str) -> tuple[float, dict[str, float]]:
    """``1.0`` -> (1.0, {}); ``compute=0.37,memory=1.02`` -> (1.0, per type); a bare number sets the default."""
    default, per_type = 1.0, {}
    try:
        for item in (part.strip() for part in text.split(",") if part.strip()):
            kind, _, value = item.rpartition("=")
            if kind:
                per_type[kind.strip()] = float(value)
            else:
                default = float(value)
    except ValueError:
        raise click.BadParameter(f"a number or TYPE=NUMBER,..., not {text!r}", param_hint="--threshold") from None
    return default, per_type


def target_option(command: Any) -> Any:
    """``--target``: what the trees learn, so ``--threshold`` can be eval's choice for that label."""
    return click.option("--target", type=click.Choice(["z", "p"]), default="z", show_default=True,
                        help="the trees' label: z in the job (threshold on expected z), or p, straggler or not "
                             "(threshold on the chance of straggling, as advise eval chooses it)")(command)
