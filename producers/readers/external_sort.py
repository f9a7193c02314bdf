"""Sort more rows than fit in memory: sorted runs in temporary files, merged lazily.

Trace tables that are not in time order (Alibaba's instance tables, a user's CSV) go through here. Rows are
tuples of JSON values (str, int, float, None) and sort by their natural tuple order, so put the sort key first
and make it unique (e.g. end with the row number). Up to ``chunk_rows`` rows are sorted in memory with no file
at all; above that each run of ``chunk_rows`` rows is written to a temporary directory as JSON lines and the
runs are merged with ``heapq.merge``, so memory stays at one run plus one row per run.

>>> list(sort_external([(3, "c"), (1, "a"), (2, "b")], chunk_rows=2))
[(1, 'a'), (2, 'b'), (3, 'c')]
"""

from __future__ import annotations

import heapq
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

Row = tuple[Any, ...]

DEFAULT_CHUNK_ROWS = 500_000


def sort_external(rows: Iterable[Row], chunk_rows: int | None = None) -> Iterator[Row]:
    """``rows`` in ascending order, holding at most ``chunk_rows`` (default DEFAULT_CHUNK_ROWS) in memory."""
    chunk_rows = DEFAULT_CHUNK_ROWS if chunk_rows is None else chunk_rows
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
    iterator = iter(rows)
    first = _take(iterator, chunk_rows)
    if len(first) < chunk_rows:
        first.sort()
        yield from first
        return
    with tempfile.TemporaryDirectory(prefix="laggard-sort-") as tmp:
        runs = [_write_run(Path(tmp), 0, first)]
        del first
        while chunk := _take(iterator, chunk_rows):
            runs.append(_write_run(Path(tmp), len(runs), chunk))
        with ExitStack() as stack:
            readers = [_read_run(path, stack) for path in runs]
            yield from heapq.merge(*readers)


def _take(iterator: Iterator[Row], count: int) -> list[Row]:
    chunk: list[Row] = []
    for row in iterator:
        chunk.append(row)
        if len(chunk) == count:
            break
    return chunk


def _write_run(directory: Path, index: int, chunk: list[Row]) -> Path:
    chunk.sort()
    path = directory / f"run-{index:05d}.jsonl"
    with path.open("wb") as handle:
        for row in chunk:
            handle.write(orjson.dumps(row))
            handle.write(b"\n")
    return path


def _read_run(path: Path, stack: ExitStack) -> Iterator[Row]:
    handle = stack.enter_context(path.open("rb"))
    return (tuple(orjson.loads(line)) for line in handle)
