"""Backward compatibility of a schema change: can the new schema read what the old one wrote?

>>> old = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
>>> new_ok = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},
...           {"name": "b", "type": "string", "default": ""}]}
>>> new_bad = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},
...            {"name": "b", "type": "string"}]}
>>> backward_problems(old, new_ok)
[]
>>> backward_problems(old, new_bad)[0].startswith("new schema cannot read old records")
True
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
from fastavro.utils import generate_many


def backward_problems(old: Any, new: Any, samples: int = 50) -> list[str]:
    """Why readers with ``new`` would fail on data written with ``old`` (empty when compatible).

    Real records from the old schema are written and read back through Avro schema resolution, so every rule
    of the specification (defaults of added fields, type promotion, enum symbols, unions) is checked by the
    decoder itself rather than by a re-implementation of the rules.
    """
    old_parsed = fastavro.parse_schema(old, _write_hint=False)
    new_parsed = fastavro.parse_schema(new, _write_hint=False)
    problems: list[str] = []
    for record in generate_many(old_parsed, samples):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, old_parsed, record)
        buffer.seek(0)
        try:
            fastavro.schemaless_reader(buffer, old_parsed, new_parsed)
        except Exception as exc:
            problems.append(f"new schema cannot read old records: {type(exc).__name__}: {exc}")
            break
    return problems
