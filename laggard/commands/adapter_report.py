"""What a run of `laggard adapter` says when it ends: one summary line on stderr and, with --json, the outcome as
one JSON document on stdout; a run the broker ended (``failed``) says so in the same document."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click
import orjson


def version_words(version: int | None) -> str:
    return "no version yet" if version is None else f"version {version}"


def report(outcome: Any, *, kind: str, cluster: str, dry_run: bool, as_json: bool) -> None:
    """One summary line on stderr; with --json, the outcome as one JSON document on stdout."""
    summary = (
        f"cluster {cluster}: "
        # the version this adapter applied: None when none was (nothing published, or every change refused)
        + ("no blacklist applied yet" if outcome.version is None else
           f"version {outcome.version} {'followed (dry run: nothing applied)' if dry_run else 'applied'}")
        + f", {len(outcome.blacklist)} node(s) blacklisted; "
        f"{outcome.applied} {'would be applied' if dry_run else 'applied'}, {outcome.refused} refused, "
        f"{outcome.skipped} skipped"
    )
    why = f": {outcome.problem}" if outcome.problem else ""
    others = sorted(outcome.other_clusters)
    hint = (f"; the topics hold blacklists of other clusters only: {', '.join(others[:5])}"
            f"{' ...' if len(others) > 5 else ''} (--cluster-id)" if outcome.version is None and others else "")
    click.echo(summary + ("" if outcome.in_sync else f" (NOT in sync{why})")
               + (f"; {outcome.state_problem}" if outcome.state_problem else "") + hint, err=True)
    if as_json:
        _echo_json(outcome, kind=kind, cluster=cluster, dry_run=dry_run)


def failed(outcome: Any, state: Any, problem: str, *, kind: str, cluster: str, dry_run: bool, as_json: bool) -> None:
    """With --json, a run that no broker answered (or whose topics are missing) is still one JSON document: the
    counts so far, ``problem`` saying what happened, and the state it stays at (``state``: the follower's). A
    script piping stdout into jq gets ``in_sync: false`` and the reason, not an empty stdout; the caller prints
    the one error line on stderr and exits 1."""
    earlier = outcome.problem  # a change refused before the broker went: both said
    outcome.problem = f"{earlier}; then {problem}" if earlier else problem
    outcome.version, outcome.blacklist = state.version, sorted(state.applied)
    if as_json:
        _echo_json(outcome, kind=kind, cluster=cluster, dry_run=dry_run)


def _echo_json(outcome: Any, *, kind: str, cluster: str, dry_run: bool) -> None:
    document = {**asdict(outcome), "in_sync": outcome.in_sync, "cluster_id": cluster, "adapter": kind,
                "dry_run": dry_run}  # fmt: skip
    click.echo(orjson.dumps(document).decode())
