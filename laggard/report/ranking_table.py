"""The ranking of one window as a table for a person (``laggard rank``, ``laggard run --table``)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from streams.core.ranking import NodeRank, Ranking

# Beyond this many nodes the table shows the ones that matter first (see print_ranking).
MAX_TABLE_ROWS = 60
NOTHING_TO_RANK = "nothing to rank: no job had 2 or more successful tasks with different durations"


def print_ranking(ranking: Ranking, console: Console, empty: str = NOTHING_TO_RANK) -> None:
    """Nodes by level, then the blacklist and why, for a person (``empty``: why there is nothing to rank)."""
    ranked = ranking.ranked
    if not ranked:
        console.print(empty)
        return
    levels = 1 + max((row.level for row in ranked if row.level is not None), default=-1)
    # A policy without levels (the running detector judges tasks, not P-Cores clusters) has none to count or show.
    on_levels = f" on [bold]{levels}[/] P-Cores levels" if levels else ""
    console.print(f"[bold]{len(ranked)}[/] nodes ranked{on_levels}, policy {ranking.policy}"
                  f"{'' if levels else ' (no levels)'}, cap {ranking.cap} node(s)"
                  + (f" of {ranking.seen:,} seen" if ranking.seen != len(ranked) else ""))
    shown = list(ranked)
    title = "Nodes by level (0 = slowest)" if levels else "Nodes by id"
    sorted_view = len(ranked) > MAX_TABLE_ROWS
    if sorted_view:
        # Many nodes with a sample or two sit on level 0 with wide intervals and push the ones that matter out of
        # view: the blacklisted first, then by the lower end of the interval, the quantity the decision turns on.
        def weight(row: NodeRank) -> tuple[bool, bool, float]:
            ci_low = row.stats.ci_low if row.stats is not None and row.stats.ci_low is not None else -math.inf
            return (not row.blacklisted, not row.eligible, -ci_low)

        shown.sort(key=weight)
        title = ("Nodes, blacklisted first, then by the lower end of their 95% interval"
                 + (" (level 0 = slowest)" if levels else
                    " of finished tasks' z (the detector also weighs tasks still running: see why)"))
    table = Table(title=title, title_justify="left")
    for name in ("level", "node", "n", "mean z", "std", "95% interval")[0 if levels else 1:]:
        table.add_column(name, justify="right" if name in ("n", "mean z", "std") else "left", no_wrap=True)
    table.add_column("blacklist / why not", overflow="fold")
    for row in shown[:MAX_TABLE_ROWS]:
        s = row.stats
        assert s is not None
        interval = "-" if s.ci_low is None or s.ci_high is None else f"[{s.ci_low:+.3f}, {s.ci_high:+.3f}]"
        # Above level 0 the level says it all; below, the guard that kept a node off matters. Without levels, a
        # listed node's mean z (finished tasks only) may be negative while its running tasks lag: say what found it.
        note = ("[bold red]BLACKLISTED[/]" + ("" if levels else f": {_headline(row.reason)}") if row.blacklisted
                else "" if row.level and not sorted_view else row.reason)
        cells = (row.node_id, str(s.n), f"{s.mean:+.3f}", f"{s.std:.3f}", interval, note)
        table.add_row(*(("-" if row.level is None else str(row.level), *cells) if levels else cells))
    console.print(table)
    if len(ranked) > MAX_TABLE_ROWS:
        console.print(f"... and {len(ranked) - MAX_TABLE_ROWS} more nodes (--json lists them all)")
    listed = [row for row in ranking.nodes if row.blacklisted]
    title = f"({len(listed)} node(s)):" if listed else "empty"
    console.print(f"\n[bold]Blacklist[/] {title}")
    for row in listed:
        console.print(f"  [bold red]{row.node_id}[/]: {row.reason}")


def _headline(reason: str) -> str:
    """A reason's first clause; for a node the policy holds, what holds it too (the blacklist below gives reasons
    whole). Clauses end at ": " or "; " outside parentheses.

    >>> _headline("clearly slow over 60 min for 2 periods: its 7 tasks run +1.3 job std behind (z 11; 3 looks)")
    'clearly slow over 60 min for 2 periods'
    >>> _headline("held: still slow (n=6, interval [-0.54, +1.48]); still slow: found +1.66 job std behind, ...")
    'held, still slow'
    >>> _headline("held: min_dwell (2 full periods after the one it was added in) not over")
    'held, min_dwell'
    >>> _headline("clearly slow over 180 min for 1 period: its 5 tasks ...; boundary drawn with seed 7")
    'clearly slow over 180 min for 1 period'
    """
    parts, depth, start = [], 0, 0
    for i, char in enumerate(reason):
        depth += (char in "([") - (char in ")]")
        if depth == 0 and reason.startswith(("; ", ": "), i):
            parts.append((reason[start:i], reason[i]))
            start = i + 2
    parts.append((reason[start:], ""))
    head = parts[0][0]
    if head != "held" or len(parts) == 1:  # the policy's own word: what holds the node follows
        return head
    detector = [text for (text, _), (_, mark) in zip(parts[1:], parts, strict=False) if mark == ";"]
    return f"held, {detector[0] if detector else parts[1][0].split(' (')[0]}"
