"""Telling the agents' ``TakenView``s (streams.agents.taken) of every assignment, revocation and seek on Faust.

Seeks come from several places: Faust's ``seek_to_committed`` after each assignment, ``replay_uncommitted``
(streams.agents.commit) seeking partitions with nothing committed to their first record, the contiguity check
seeking back to a record skipped at a rebalance (streams.agents.checkpoint), a table's recovery. They all go
through the Faust consumer's ``seek_to_committed``, ``seek_wait``, ``_seek`` (behind ``seek``) or
``seek_to_beginning``, so ``notify_seeks`` wraps those four on the consumer, and a view hears of every seek
whoever asked for it. It hears both before and after the seek: a record taken meanwhile, or an end asked
meanwhile, does not count.
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
        async def seeking(*args: Any) -> Any:
            tell(which(*args))
            try:
                return await seek(*args)
            finally:
                tell(which(*args))

        return seeking

    consumer.seek_to_committed = around(consumer.seek_to_committed, lambda: None)  # every assigned partition
    consumer.seek_wait = around(consumer.seek_wait, lambda partitions: list(partitions))
    consumer._seek = around(consumer._seek, lambda partition, offset: [partition])
    consumer.seek_to_beginning = around(consumer.seek_to_beginning, lambda *partitions: partitions or None)
    return consumer
