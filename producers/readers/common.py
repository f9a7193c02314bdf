"""What every trace reader shares: the counters of skipped and bad rows, and opening text files.

Readers are pure: rows in, events out. They never talk to Kafka and never stop on a bad row; they count it,
keep the first few with file, line and reason, and go on.

>>> stats = ReadStats()
>>> stats.bad("part-0.csv", 7, "expected 13 columns, got 12")
>>> stats.skip("start before the trace")
>>> stats.bad_rows, stats.skipped, stats.bad_examples[0].line
(1, 1, 7)
"""

from __future__ import annotations

import csv
import errno
import gzip
import io
import math
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streams.core.events import JobFinish, JobStart, TaskCheckpoint, TaskFinish, TaskStart

US_PER_S = 1_000_000

# Rank of simultaneous events: a job starts before its tasks, a task starts before it reports or ends,
# and a job ends after its tasks.
RANK = {JobStart: 0, TaskStart: 1, TaskCheckpoint: 2, TaskFinish: 3, JobFinish: 4}


@dataclass(frozen=True, slots=True)
class BadRow:
    """One row that could not be read: where it was and why."""

    file: str
    line: int
    reason: str


@dataclass
class ReadStats:
    """Counters a reader fills while it is iterated; ``max_examples`` bad rows are kept verbatim."""

    max_examples: int = 5
    skipped: int = 0
    bad_rows: int = 0
    bad_examples: list[BadRow] = field(default_factory=list)
    skip_reasons: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str, count: int = 1) -> None:
        """An event that exists in the trace but cannot be placed (e.g. it began before the trace)."""
        self.skipped += count
        self.skip_reasons[reason] += count

    def bad(self, file: str | Path, line: int, reason: str) -> None:
        """A row that is malformed: wrong column count, not a number, ends before it starts."""
        self.bad_rows += 1
        if len(self.bad_examples) < self.max_examples:
            self.bad_examples.append(BadRow(str(file), line, reason))


class _NamedGzipFile(gzip.GzipFile):
    """A gzip stream whose damage is an OSError naming the file: gzip raises EOFError for a truncated file (which
    click turns into a bare "Aborted!"), zlib.error for corrupt data and BadGzipFile without the file's name."""

    def read(self, size: int | None = -1) -> bytes:
        try:
            return super().read(size)
        except _DAMAGE as exc:
            raise self._damaged(exc) from None

    def read1(self, size: int = -1) -> bytes:
        try:
            return super().read1(size)
        except _DAMAGE as exc:
            raise self._damaged(exc) from None

    def _damaged(self, exc: Exception) -> OSError:
        return OSError(errno.EIO, f"damaged gzip file ({exc or 'it ends before its end marker'})", self.name)


_DAMAGE = (EOFError, zlib.error, gzip.BadGzipFile)


def open_text(path: Path) -> io.TextIOBase:
    """A text handle on ``path``, decompressing ``.gz`` files as they stream (damage is an OSError naming it); a
    byte-order mark (a spreadsheet's "CSV UTF-8" export) is not part of the first column's name."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(_NamedGzipFile(path, "rb"), encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of each non-empty CSV row of ``path`` (plain or gzip)."""
    with open_text(path) as handle:
        for line, fields in enumerate(csv.reader(handle), start=1):
            if fields:
                yield line, fields


def require_file(path: Path) -> Path:
    """``path`` if it is a readable file, else the error the CLI prints as one line."""
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory (this format reads one file)", str(path))
    return path


def require_dir(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if not path.is_dir():
        raise NotADirectoryError(20, "Not a directory (this format reads a directory)", str(path))
    return path


def seconds_to_us(text: str) -> int:
    """Trace seconds (an integer, sometimes written as a float) to integer microseconds."""
    try:
        return int(text) * US_PER_S
    except ValueError:
        value = float(text)  # raises ValueError for words
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {text!r}") from None
        return round(value * US_PER_S)
