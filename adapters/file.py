"""The simplest scheduler: a plain file of blacklisted node names, one per line, replaced atomically.

Any tool can read it (a cron job, a scheduler plugin, `grep`). The whole file is rewritten on every change,
so applying the same change twice writes the same bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from adapters.base import prefix, write_for_scheduler
from adapters.follower import Change

log = logging.getLogger("laggard.adapters")


def render_plain(nodes: Iterable[str]) -> str:
    """One node per line, sorted, with a final newline (empty text for an empty list)."""
    return "".join(f"{node}\n" for node in sorted(nodes))


class FileApplier:
    """Keeps ``path`` equal to the current blacklist."""

    name = "file"

    def __init__(self, path: Path, dry_run: bool = False) -> None:
        self.path = Path(path)
        self.dry_run = dry_run

    def apply(self, change: Change) -> None:
        log.info("%sreplace %s with %d node(s)", prefix(self.dry_run), self.path, len(change.after))
        if not self.dry_run:
            write_for_scheduler(self.path, render_plain(change.after))

    def known_nodes(self) -> frozenset[str] | None:
        return None
