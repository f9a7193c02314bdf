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

**Host names** (``host_map``). The RM matches an exclude entry against a node's host name or IP address, never its
port (``NodesListManager.isValidNode``), so an entry must be what YARN calls the host: the ``nodeHostName`` of
``yarn node -list -all`` or ``/ws/v1/cluster/nodes``. laggard's node ids are whatever the traces call a machine;
where that differs, a host map file says, one ``NODE HOST`` pair a line (``#`` comments), which host each node
is. Several nodes may share a host (the host stays excluded while any of them is listed); a listed node missing
from the map is written under its own name, with a warning. Flag files are named after the host too, as the
health script looks up its own host name.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from xml.sax.saxutils import escape

from adapters.base import ApplyError, prefix, write_for_scheduler
from adapters.file import render_plain
from adapters.follower import Change

log = logging.getLogger("laggard.adapters")

ExcludeFormat = Literal["plain", "xml"]
DEFAULT_REFRESH = "yarn rmadmin -refreshNodes"
FLAG_MARK = "laggard:"
# A flag file is named after its node: refuse names that would leave the directory or hide the file.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*$")
_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")


def load_host_map(path: Path) -> dict[str, str]:
    """``NODE HOST`` per line (``#`` comments, blank lines skipped); ValueError names the file and line.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".map", delete=False) as f:
    ...     _ = f.write("node-07 nm7.example.com  # rack 2\\n\\nnode-08 10.0.0.8\\n")
    >>> load_host_map(Path(f.name))
    {'node-07': 'nm7.example.com', 'node-08': '10.0.0.8'}
    >>> os.unlink(f.name)
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the host map {path}: {exc.strerror or exc}") from None
    hosts: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2:
            raise ValueError(f"host map {path} line {number}: expected 'NODE HOST', got {line.strip()!r}")
        node, host = fields
        if hosts.get(node, host) != host:
            raise ValueError(f"host map {path} line {number}: node {node!r} already maps to {hosts[node]!r}")
        hosts[node] = host
    return hosts


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
        host_map: Mapping[str, str] | None = None,
    ) -> None:
        if exclude_file is None and health_dir is None:
            raise ValueError("give an exclude file, a health directory, or both")
        self.exclude_file = exclude_file
        self.exclude_format = exclude_format
        self.refresh_command = refresh_command
        self.health_dir = health_dir
        self.refresh_timeout_s = refresh_timeout_s
        self.dry_run = dry_run
        self.host_map = dict(host_map) if host_map is not None else None
        self._format = format_for(exclude_file, exclude_format) if exclude_file is not None else "plain"

    def host(self, node: str) -> str:
        """The name YARN knows ``node`` by: its host map entry, else the node id itself."""
        return node if self.host_map is None else self.host_map.get(node, node)

    def apply(self, change: Change) -> None:
        hosts = {self.host(node) for node in change.after}
        if self.host_map is not None and (unmapped := sorted(change.after - self.host_map.keys())):
            log.warning("not in the host map, written under their own names: %s", ", ".join(unmapped))
        if self.health_dir is not None:
            try:
                self._sync_flags(change, hosts)
            except OSError as exc:  # a file where the directory should be, a parent it may not write in
                where = f": {exc.filename}" if exc.filename and str(exc.filename) != str(self.health_dir) else ""
                raise ApplyError(f"cannot keep health flags in {self.health_dir}: {exc.strerror or exc}{where}") \
                    from exc
        if self.exclude_file is not None:
            text = render_xml(hosts) if self._format == "xml" else render_plain(hosts)
            log.info(
                "%sreplace exclude file %s (%s) with %d host(s)",
                prefix(self.dry_run),
                self.exclude_file,
                self._format,
                len(hosts),
            )
            if not self.dry_run:
                write_for_scheduler(self.exclude_file, text)
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
        except subprocess.TimeoutExpired as exc:  # "could not run: Command [...] timed out": it ran, and was killed
            raise ApplyError(
                f"refresh command {self.refresh_command!r} timed out after {self.refresh_timeout_s:g} s and was "
                f"stopped: the exclude file {self.exclude_file} is written, but the ResourceManager may not have "
                "re-read it; the change counts as not applied, and the next try writes the file and runs the "
                "refresh again"
            ) from exc
        except OSError as exc:
            raise ApplyError(f"refresh command {self.refresh_command!r} could not run: {exc}") from exc
        if done.returncode != 0:
            raise ApplyError(
                f"refresh command {self.refresh_command!r} exited with status "
                f"{done.returncode}: {summary(done.stderr or done.stdout)}"
            )

    def _sync_flags(self, change: Change, hosts: set[str]) -> None:
        assert self.health_dir is not None
        directory = self.health_dir
        reasons: dict[str, str] = {}
        for entry in change.added:
            reasons.setdefault(self.host(entry.node_id), entry.reason)
        if not self.dry_run:
            directory.mkdir(parents=True, exist_ok=True)
        for node in sorted(hosts):
            if not _SAFE_NAME.match(node):
                log.error("no flag file for node %r: the name is not a safe file name", node)
                continue
            flag = directory / node
            if node in reasons or not flag.exists():
                reason = reasons.get(node, "on the blacklist")
                log.info("%swrite flag %s", prefix(self.dry_run), flag)
                if not self.dry_run:
                    write_for_scheduler(flag, f"{FLAG_MARK} {reason} (blacklist version {change.version})\n")
        for flag in sorted(directory.iterdir()) if directory.is_dir() else []:
            if flag.name not in hosts and flag.is_file() and _written_by_laggard(flag):
                log.info("%sremove flag %s", prefix(self.dry_run), flag)
                if not self.dry_run:
                    flag.unlink(missing_ok=True)


def summary(output: str, lines: int = 3) -> str:
    """The last few lines of a failed command's output that say something: a Java stack trace's frames
    (``at ...``, ``... 12 more``) are left out, so ``rmadmin``'s own message or the exception's cause remains.

    >>> summary("WARN x\\nException in thread main java.lang.X: boom\\n\\tat a.B.c(B.java:1)\\n\\t... 3 more\\n")
    'WARN x | Exception in thread main java.lang.X: boom'
    """
    kept = [line.strip() for line in output.splitlines() if line.strip() and not _FRAME.match(line)]
    return " | ".join(kept[-lines:]) or "no output"


def _written_by_laggard(flag: Path) -> bool:
    try:
        with flag.open(encoding="utf-8", errors="replace") as handle:
            return handle.readline().startswith(FLAG_MARK)
    except OSError:
        return False
