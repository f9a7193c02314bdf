"""Snapshot and restore of a per-job predictor, for a stream agent's state store.

Why pickle and not plain data: the learned state is River models (a StandardScaler's running moments,
a linear model's weights and optimizer state, a KNN window, trees...), whose internals differ per
estimator and per River release; River itself documents pickling as the way to persist a model. So the
state is pickled inside a versioned envelope of plain data, and a mismatch (another envelope version,
another River release, another method) raises ``SnapshotMismatch``: the caller logs a warning and
starts the job cold, never crashes. Never unpickle bytes from an untrusted source.

>>> from streams.core.prediction.methods import make_method
>>> job = make_method("nurd", tau_s=300.0)
>>> envelope = snapshot(job)
>>> envelope["kind"], envelope["version"], envelope["method"]
('laggard.nurd.predictor', 1, 'nurd')
>>> restore(envelope).method
'nurd'
>>> restore({**envelope, "version": 0})
Traceback (most recent call last):
...
streams.core.prediction.snapshot.SnapshotMismatch: snapshot version 0, this build reads 1: start the job cold
"""

from __future__ import annotations

import pickle
from typing import Any

import river

from streams.core.prediction.methods import Predictor

KIND = "laggard.nurd.predictor"
RIVER: str = getattr(river, "__version__", "unknown")
VERSION = 1


class SnapshotMismatch(ValueError):
    """The snapshot was written by another build; start the job cold."""


def snapshot(predictor: Predictor) -> dict[str, Any]:
    """A plain-data envelope around the pickled predictor."""
    return {
        "kind": KIND,
        "version": VERSION,
        "river": RIVER,
        "method": predictor.method,
        "state": pickle.dumps(predictor, protocol=pickle.HIGHEST_PROTOCOL),
    }


def restore(envelope: dict[str, Any]) -> Predictor:
    """The predictor inside ``envelope``; ``SnapshotMismatch`` if this build cannot trust it."""
    if envelope.get("kind") != KIND:
        raise SnapshotMismatch(f"not a predictor snapshot: kind {envelope.get('kind')!r}")
    if envelope.get("version") != VERSION:
        raise SnapshotMismatch(
            f"snapshot version {envelope.get('version')}, this build reads {VERSION}: start the job cold"
        )
    if envelope.get("river") != RIVER:
        raise SnapshotMismatch(f"snapshot of River {envelope.get('river')}, running {RIVER}: start the job cold")
    predictor = pickle.loads(envelope["state"])  # our own envelope, checked above
    if getattr(predictor, "method", None) != envelope.get("method"):
        raise SnapshotMismatch("snapshot method does not match its envelope")
    return predictor  # type: ignore[no-any-return]
