"""YARN: the ResourceManager's exclude file plus a refresh, and/or flag files for the health script.

**Exclude file** (``yarn.resourcemanager.nodes.exclude-path``). Hadoop's ``HostsFileReader`` reads it as XML
when the file name ends in ``.xml`` and as plain text (names separated by white space, ``#`` comments)
otherwise; the XML form is ``<hosts><host><name>NAME</name></host>...</hosts>``, where a ``<timeout>`` per
host would ask for graceful decommissioning (laggard writes none: the RM's default applies). Source: Hadoop's
GracefulDecommission guide and ``org.apache.hadoop.util.HostsFileReader.readFileToMapWithFileInputStream``.
After each change the refresh command runs (default ``yarn rmadmin -refreshNodes``); if it fails the change
counts as not applied and is tried again. laggard owns the exclude file and rewrites it whole: entries an
operator put there for their own decommissions are replaced (and refreshNodes would recommission those hosts),
so point the RM at a file only laggard writes, or use the health directory instead.

Excluding a node decommissions it, which drains it. For "stop placing new containers here" without
decommissioning, use the health directory: one flag file per blacklisted node, whose first line is the
reason; ``scripts/yarn-health-check DIR`` (the NodeManager health script) prints ``ERROR ...`` while its
node's file exists, and YARN marks the node UNHEALTHY. laggard removes only flag files it wrote (first line
starts with ``laggard:``), so an operator's own flag files stay.
"""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
from pathlib import Path
from typing import Literal
from xml.sax.saxutils import escape

from adapters.base import ApplyError, prefix, write_atomically
from adapters.file import render_plain
from adapters.follower import Change

log = logging.getLogger("laggard.adapters")

ExcludeFormat = Literal["plain", "xml"]
DEFAULT_REFRESH = "yarn rmadmin -refreshNodes"
FLAG_MARK = "laggard:"
# A flag file is named after its node: refuse names that would leave the directory or hide the file.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*$")


def render_xml(nodes: set[str] | frozenset[str]) -> str:
    """The XML exclude form Hadoop's HostsFileReader reads."""
    hosts = "".join(f"  <host><name>{escape(node)}</name></host>\n" for node in sorted(nodes))
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<hosts>\n{hosts}</hosts>\n'


def format_for(path: Path, requested: ExcludeFormat | None) -> ExcludeFormat:
    """The format Hadoop will read ``path`` in; a mismatch with ``requested`` is a configuration error."""
    hadoop_reads: ExcludeFormat = "xml" if path.name.lower().endswith(".xml") else "plain"
    if requested is not None and requested != hadoop_reads:
        raise ValueError(
            f"Hadoop reads {path.name} as {hadoop_reads} (it decides by the .xml suffix), "
            f"not {requested}: rename the file or drop --exclude-format"
        )
    return hadoop_reads


class YarnApplier:
    """Writes the exclude file and refreshes the RM, and/or keeps one flag file per blacklisted node."""

    name = "yarn"

    def __init__(
        self,
        exclude_file: Path | None = None,
        exclude_format: ExcludeFormat | None = None,
        refresh_command: str | None = DEFAULT_REFRESH,
        health_dir: Path | None = None,
        refresh_timeout_s: float = 120.0,
        dry_run: bool = False,
    ) -> None:
        if exclude_file is None and health_dir is None:
            raise ValueError("give an exclude file, a health directory, or both")
        self.exclude_file = exclude_file
        self.exclude_format = exclude_format
        self.refresh_command = refresh_command
        self.health_dir = health_dir
        self.refresh_timeout_s = refresh_timeout_s
        self.dry_run = dry_run
        self._format = format_for(exclude_file, exclude_format) if exclude_file is not None else "plain"

    def apply(self, change: Change) -> None:
        if self.health_dir is not None:
            self._sync_flags(change)
        if self.exclude_file is not None:
            text = render_xml(change.after) if self._format == "xml" else render_plain(change.after)
            log.info(
                "%sreplace exclude file %s (%s) with %d node(s)",
                prefix(self.dry_run),
                self.exclude_file,
                self._format,
                len(change.after),
            )
            if not self.dry_run:
                write_atomically(self.exclude_file, text)
            self._refresh()

    def known_nodes(self) -> frozenset[str] | None:
        return None

    def _refresh(self) -> None:
        if not self.refresh_command:
            return
        log.info("%srun %s", prefix(self.dry_run), self.refresh_command)
        if self.dry_run:
            return
        try:
            done = subprocess.run(
                shlex.split(self.refresh_command),
                capture_output=True,
                text=True,
                timeout=self.refresh_timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ApplyError(f"refresh command {self.refresh_command!r} could not run: {exc}") from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ApplyError(
                f"refresh command {self.refresh_command!r} exited with status "
                f"{done.returncode}: {' | '.join(tail) or 'no output'}"
            )

    def _sync_flags(self, change: Change) -> None:
        assert self.health_dir is not None
        directory = self.health_dir
        reasons = {entry.node_id: entry.reason for entry in change.added}
        if not self.dry_run:
            directory.mkdir(parents=True, exist_ok=True)
        for node in sorted(change.after):
            if not _SAFE_NAME.match(node):
                log.error("no flag file for node %r: the name is not a safe file name", node)
                continue
            flag = directory / node
            if node in reasons or not flag.exists():
                reason = reasons.get(node, "on the blacklist")
                log.info("%swrite flag %s", prefix(self.dry_run), flag)
                if not self.dry_run:
                    write_atomically(flag, f"{FLAG_MARK} {reason} (blacklist version {change.version})\n")
        for flag in sorted(directory.iterdir()) if directory.is_dir() else []:
            if flag.name not in change.after and flag.is_file() and _written_by_laggard(flag):
                log.info("%sremove flag %s", prefix(self.dry_run), flag)
                if not self.dry_run:
                    flag.unlink(missing_ok=True)


def _written_by_laggard(flag: Path) -> bool:
    try:
        with flag.open(encoding="utf-8", errors="replace") as handle:
            return handle.readline().startswith(FLAG_MARK)
    except OSError:
        return False
