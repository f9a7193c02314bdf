"""Every schema stays backward compatible with its previous committed version (SPEC 2).

The previous version is read from git history: the newest committed content of the file that differs from the
working copy. A schema without history has nothing to be compatible with yet.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import fastavro
import pytest

from streams.serde import codec
from streams.serde.compat import backward_problems

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = sorted(codec.SCHEMA_DIR.glob("*.avsc"))


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


def previous_version(path: Path) -> str | None:
    relative = path.relative_to(REPO).as_posix()
    current = path.read_text()
    for commit in _git("log", "--format=%H", "--", relative).split():
        old = _git("show", f"{commit}:{relative}")
        if old != current:
            return old
    return None


def _expanded(text: str, directory: Path) -> object:
    """Parse a schema text whose named references live in sibling files of the current tree."""
    named: dict[str, object] = {}
    for other in directory.glob("*.avsc"):
        fastavro.schema.load_schema(str(other), named_schemas=named)
    return fastavro.schema.expand_schema(fastavro.parse_schema(json.loads(text), named_schemas=dict(named)))


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.stem)
def test_schema_is_backward_compatible_with_its_previous_committed_version(path: Path) -> None:
    old = previous_version(path)
    if old is None:
        pytest.skip(f"{path.name} has no earlier committed version")
    assert backward_problems(_expanded(old, path.parent), _expanded(path.read_text(), path.parent)) == []


def test_the_check_catches_a_field_added_without_a_default() -> None:
    current = json.loads(codec.schema_path("JobFinish").read_text())
    broken = dict(current, fields=[*current["fields"], {"name": "x", "type": "long", "doc": "no default"}])
    assert backward_problems(current, broken)


def test_every_field_added_after_the_first_version_has_a_default() -> None:
    for path in SCHEMAS:
        old = previous_version(path)
        if old is None:
            continue
        old_names = {f["name"] for f in json.loads(old)["fields"]}
        for field in json.loads(path.read_text())["fields"]:
            assert field["name"] in old_names or "default" in field, f"{path.name}: {field['name']} lacks a default"


def test_records_of_an_old_writer_schema_still_decode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JobStart written before `declared_tasks` existed decodes, with the field's default."""
    current = json.loads(codec.schema_path("JobStart").read_text())
    old = dict(current, fields=[f for f in current["fields"] if f["name"] != "declared_tasks"])
    (tmp_path / "io.laggard.JobStart.v0.avsc").write_text(json.dumps(old))
    monkeypatch.setattr(codec, "PREVIOUS_DIR", tmp_path)
    codec._previous_writers.cache_clear()
    try:
        parsed = fastavro.parse_schema(old)
        buffer = __import__("io").BytesIO()
        fastavro.schemaless_writer(buffer, parsed, {"job_id": "j9", "ts_us": 77})
        data = codec.MAGIC + codec.fingerprint_of(parsed) + buffer.getvalue()
        from streams.core.events import JobStart

        assert codec.decode(data) == JobStart("j9", 77, None)
    finally:
        codec._previous_writers.cache_clear()
