"""What every scheduler adapter has in common: the applier interface, its error, and atomic file writes.

An applier acts on one ``Change`` (``adapters.follower``): ``change.added`` and ``change.removed`` are the
nodes that really change, ``change.after`` the whole blacklist once applied. It must be idempotent (applying
the same change twice leaves the scheduler as once) and, with ``dry_run``, only log what it would do. It
raises ``ApplyError`` when the scheduler did not take the change; the consumer then keeps the previous version
and tries again, so nothing is lost.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Protocol

from adapters.follower import Change

log = logging.getLogger("laggard.adapters")


class ApplyError(RuntimeError):
    """The scheduler did not take the change (endpoint down, command failed, API error)."""


class Applier(Protocol):
    """One scheduler's way of acting on blacklist changes."""

    name: str
    dry_run: bool

    def apply(self, change: Change) -> None:
        """Make the scheduler avoid ``change.after``; raise ApplyError if it did not take it."""
        ...

    def known_nodes(self) -> frozenset[str] | None:
        """The cluster's nodes when the scheduler can list them (the cap's denominator), else None."""
        ...


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that readers see the old or the new file, never a part.

    The temporary file lives in the same directory (``os.replace`` is atomic only within a file system)
    and gets the old file's permissions, or 0644: a ResourceManager running as another user must read it.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:  # it named the hidden temporary file, not the file the operator gave
        raise OSError(exc.errno, f"{exc.strerror} (cannot write in {directory})", str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except OSError as exc:  # e.g. the path is a directory: name it, not the temporary file
        Path(temp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def prefix(dry_run: bool) -> str:
    """Log prefix of an action: what would be done in a dry run."""
    return "[dry-run] would " if dry_run else ""


def write_for_scheduler(path: Path, text: str) -> None:
    """``write_atomically`` for an applier: a file it cannot write (a full disk, a permission taken away, a
    directory in its place) is a change the scheduler did not take, ``ApplyError`` naming the file, which the
    consumer retries (``--once``: exit 3), not the end of a long-running adapter."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise ApplyError(f"cannot write {exc.filename or path}: {exc.strerror or exc}") from exc
