"""The ``key=value,...`` specs of generated traces (``synthetic:``, ``drifting:``, ``scenario:``), parsed one way.

>>> parse_key_values("nodes=4, seed=2", "demo", ("nodes", "seed"), lambda key, raw: int(raw))
{'nodes': 4, 'seed': 2}
>>> parse_key_values("nodes=x", "demo", ("nodes",), lambda key, raw: int(raw))
Traceback (most recent call last):
...
ValueError: demo: bad value for nodes: 'x'
>>> parse_key_values("colour=red", "demo", ("nodes",), lambda key, raw: raw)
Traceback (most recent call last):
...
ValueError: demo: unknown key 'colour' (known: nodes)
>>> parse_key_values("nodes", "demo", ("nodes",), lambda key, raw: raw)
Traceback (most recent call last):
...
ValueError: demo: nodes has no value: expected nodes=VALUE
>>> parse_key_values("nodes=4,nodes=40", "demo", ("nodes",), lambda key, raw: int(raw))
Traceback (most recent call last):
...
ValueError: demo: nodes is given twice (4 and 40): give it once
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any


def parse_key_values(
    text: str | Iterable[str], kind: str, keys: Sequence[str], convert: Callable[[str, str], Any]
) -> dict[str, Any]:
    """``key=value`` items (a comma-separated string, or the items already split) -> {key: convert(key, raw)}.

    An unknown key, a key given twice (the last one silently won: a typo'd spec ran another cluster than the
    one meant), a missing ``=``, a value ``convert`` refuses (ValueError) or a non-finite number is a
    ValueError whose message names the trace kind, the key and the value: one line for the user."""
    items = text.split(",") if isinstance(text, str) else text
    values: dict[str, Any] = {}
    raws: dict[str, str] = {}
    for item in (part.strip() for part in items):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep and key in keys:
            raise ValueError(f"{kind}: {key} has no value: expected {key}=VALUE")
        if not sep or key not in keys:
            raise ValueError(f"{kind}: unknown key {key!r} (known: {', '.join(keys)})")
        if key in raws:
            raise ValueError(f"{kind}: {key} is given twice ({raws[key]} and {raw}): give it once")
        raws[key] = raw
        try:
            value = convert(key, raw)
        except ValueError:
            raise ValueError(f"{kind}: bad value for {key}: {raw!r}") from None
        parts = value if isinstance(value, tuple) else (value,)
        if any(isinstance(v, float) and not math.isfinite(v) for v in parts):
            raise ValueError(f"{kind}: bad value for {key}: {raw!r}")
        values[key] = value
    return values
