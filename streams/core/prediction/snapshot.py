"""Snapshot and restore of learned predictor state (a job predictor, or a method's cluster-level state),
for a stream agent's state store.

Why pickle and not plain data: the learned state is River models (a StandardScaler's running moments,
a linear model's weights and optimizer state, a KNN window, trees...), whose internals differ per
estimator and per River release; River itself documents pickling as the way to persist a model. So the
state is pickled inside a versioned envelope of plain data, and a mismatch (another envelope version,
another River release, another method) raises ``SnapshotMismatch``: the caller logs a warning and
starts the job cold, never crashes. Never unpickle bytes from an untrusted source.

>>> from streams.core.prediction.threshold import Oracle
>>> from streams.core.prediction.nurd.nurd import NurdJob
>>> envelope = snapshot(NurdJob(Oracle(300.0)))
>>> envelope["kind"], envelope["version"], envelope["method"]
('laggard.nurd.predictor', 2, 'nurd')
>>> restore(envelope).method
'nurd'
>>> restore({**envelope, "version": 0})
Traceback (most recent call last):
...
streams.core.prediction.snapshot.SnapshotMismatch: snapshot version 0, this build reads 2: start the job cold
"""

from __future__ import annotations

import pickle
from typing import Any

import river

KIND = "laggard.nurd.predictor"
RIVER: str = getattr(river, "__version__", "unknown")
VERSION = 2  # 2: job predictors with separate predict and learn


class SnapshotMismatch(ValueError):
    """The snapshot was written by another build; start the job cold."""


def snapshot(state: Any, method: str | None = None) -> dict[str, Any]:
    """A plain-data envelope around pickled ``state``; ``method`` defaults to ``state.method``."""
    return {
        "kind": KIND,
        "version": VERSION,
        "river": RIVER,
        "method": method if method is not None else state.method,
        "state": pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL),
    }


def restore(envelope: dict[str, Any], method: str | None = None) -> Any:
    """The state inside ``envelope``; ``SnapshotMismatch`` if this build cannot trust it. A job predictor
    must carry its envelope's method; other state is checked against ``method`` when given."""
    if envelope.get("kind") != KIND:
        raise SnapshotMismatch(f"not a predictor snapshot: kind {envelope.get('kind')!r}")
    if envelope.get("version") != VERSION:
        raise SnapshotMismatch(
            f"snapshot version {envelope.get('version')}, this build reads {VERSION}: start the job cold"
        )
    if envelope.get("river") != RIVER:
        raise SnapshotMismatch(f"snapshot of River {envelope.get('river')}, running {RIVER}: start the job cold")
    if method is not None and envelope.get("method") != method:
        raise SnapshotMismatch(f"snapshot of method {envelope.get('method')!r}, running {method!r}")
    state = pickle.loads(envelope["state"])  # our own envelope, checked above
    if method is None and getattr(state, "method", None) != envelope.get("method"):
        raise SnapshotMismatch("snapshot method does not match its envelope")
    return state
