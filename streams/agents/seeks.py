"""Telling the agents' ``TakenView``s (streams.agents.taken) of every assignment, revocation and seek on Faust.

Seeks come from several places: Faust's ``seek_to_committed`` after each assignment, ``replay_uncommitted``
(streams.agents.commit) seeking partitions with nothing committed to their first record, the contiguity check
seeking back to a record skipped at a rebalance (streams.agents.checkpoint), a table's recovery. They all go
through the Faust consumer's ``seek_to_committed``, ``seek_wait`` or ``_seek`` (behind ``seek``; and
``seek_to_beginning`` where a consumer has it: faust-streaming 0.15's has not), so ``notify_seeks`` wraps those
on the consumer, and a view hears of every seek whoever asked for it. It hears both before and after the seek: a
record taken meanwhile, or an end asked meanwhile, does not count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import faust
from faust.types.tuples import TP
from mode.types.signals import SignalHandlerT

from streams.agents.taken import TakenView

VIEWS_ATTRIBUTE = "_laggard_taken_views"  # the app's agents' views, kept on the app (they live as long as it)


def views_of(app: Any) -> list[TakenView]:
    """The views told of ``app``'s seeks (made empty on first use)."""
    views: list[TakenView] | None = getattr(app, VIEWS_ATTRIBUTE, None)
    if views is None:
        views = []
        setattr(app, VIEWS_ATTRIBUTE, views)
    return views


def watch(app: faust.App, view: TakenView) -> None:
    """Tell ``view`` of ``app``'s seeks and assignments (its revocations: ``PartitionStates`` does)."""
    views_of(app).append(view)

    async def assigned(sender: object, *args: set[TP], **kwargs: object) -> None:
        for partitions in args:  # Faust sends one: the whole new assignment
            view.assign(partitions)

    app.on_partitions_assigned.connect(cast("SignalHandlerT[Any]", assigned))


def notify_seeks(consumer: Any, views: list[TakenView]) -> Any:
    """Make every seek of ``consumer`` (a Faust consumer) forget, in each of ``views``, what was learnt of the
    partitions it concerns; return the consumer."""

    def tell(partitions: Iterable[Any] | None) -> None:
        listed = None if partitions is None else [(tp[0], tp[1]) for tp in partitions]
        for view in views:
            view.sought(listed)

    def around(seek: Callable[..., Awaitable[Any]], which: Callable[..., Iterable[Any] | None]
               ) -> Callable[..., Awaitable[Any]]:
        async def seeking(*args: Any, **kwargs: Any) -> Any:
            tell(which(*args, **kwargs))
            try:
                return await seek(*args, **kwargs)
            finally:
                tell(which(*args, **kwargs))

        return seeking

    which: dict[str, Callable[..., Iterable[Any] | None]] = {
        "seek_to_committed": lambda **_: None,  # every assigned partition
        "seek_wait": lambda partitions, **_: list(partitions),
        "_seek": lambda partition, offset, **_: [partition],
        "seek_to_beginning": lambda *partitions, **_: partitions or None,  # on the thread, not Faust's consumer (0.15)
    }
    for name, partitions in which.items():
        if name != "seek_to_beginning" or hasattr(consumer, name):  # the others must be there: the views rely on them
            setattr(consumer, name, around(getattr(consumer, name), partitions))
    return consumer
