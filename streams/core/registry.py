"""Named building blocks: one registry per kind (detectors, policies, predictors), read by everyone.

Settings validate names against a registry, the CLI offers ``registry.names()`` as its choices and the
docs print ``registry.describe()``; nothing else keeps a list of names. Registering a new detector,
policy or predictor is one call, and from then on ``laggard run``/``eval``/``worker`` accept its name.

>>> shapes: Registry[int] = Registry("shape")
>>> shapes.register("square", 4, "four equal sides")
>>> shapes.names(), shapes.get("square")
(('square',), 4)
>>> shapes.get("circle")
Traceback (most recent call last):
...
ValueError: unknown shape 'circle'; one of: square
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One registered name: what it builds and one line of help."""

    name: str
    factory: T
    doc: str


class Registry(Generic[T]):
    """Names -> factories of one kind, in registration order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, factory: T, doc: str, *, replace: bool = False) -> None:
        """Add ``name``; a second registration of the same name is an error unless ``replace``."""
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = Entry(name, factory, doc)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a toy remove it again)."""
        self._entries.pop(name, None)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def entry(self, name: str) -> Entry[T]:
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; one of: {', '.join(self._entries)}") from None

    def get(self, name: str) -> T:
        """The factory registered as ``name``; an unknown name is a ValueError that lists the known ones."""
        return self.entry(name).factory

    def describe(self) -> list[tuple[str, str]]:
        """(name, one line of help) for every entry, for --help texts and docs."""
        return [(e.name, e.doc) for e in self._entries.values()]
