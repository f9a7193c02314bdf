"""LocalPipeline.run collects cycles less often while it runs, and leaves the process as it found it."""

from __future__ import annotations

import gc

from producers.registry import open_trace
from streams.local import GC_YOUNG_THRESHOLD, LocalPipeline
from streams.settings import Settings


def test_a_run_raises_the_young_threshold_while_it_lasts_and_restores_it_even_when_abandoned() -> None:
    before = gc.get_threshold()
    seen = []
    pipeline = LocalPipeline(Settings(), on_ranking=lambda result: seen.append(gc.get_threshold()[0]))
    deltas = list(pipeline.run(open_trace("synthetic:nodes=40,slow=3,jobs=150,seed=1")))
    assert deltas and seen and set(seen) == {max(before[0], GC_YOUNG_THRESHOLD)}
    assert gc.get_threshold() == before
    abandoned = LocalPipeline(Settings()).run(open_trace("synthetic:nodes=40,slow=3,jobs=150,seed=1"))
    next(abandoned)  # the first delta, then the caller walks away
    abandoned.close()
    assert gc.get_threshold() == before


def test_a_caller_who_turned_collection_off_or_changed_it_during_a_run_keeps_their_setting() -> None:
    from streams.local import fewer_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(0)  # automatic collection off: a run must not turn it back on
        with fewer_collections():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold()[0] == 0
        gc.set_threshold(*before)
        with fewer_collections():
            gc.set_threshold(1234)  # the caller's own choice during the run stays
        assert gc.get_threshold()[0] == 1234
    finally:
        gc.set_threshold(*before)
