"""docker-compose.yml and k8s/ name real commands, options and settings (no Docker or cluster runs here;
this checks what can be checked without one: a typo in a manifest would otherwise only fail in production)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from laggard.cli import cli
from streams.settings import Settings

REPO = Path(__file__).resolve().parents[3]


def _documents() -> list[tuple[str, Any]]:
    files = [REPO / "docker-compose.yml", *sorted((REPO / "k8s").glob("**/*.yaml"))]
    return [(f.name, doc) for f in files for doc in yaml.safe_load_all(f.read_text()) if doc]


def _walk(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_walk(value))
    return found


def _commands() -> list[tuple[str, list[str]]]:
    commands = []
    for name, doc in _documents():
        for node in _walk(doc):
            if isinstance(node, dict):
                for key in ("args", "command"):
                    if isinstance(node.get(key), list) and node[key] and isinstance(node[key][0], str):
                        commands.append((name, [str(part) for part in node[key]]))
    return commands


def _setting_names() -> set[str]:
    names = set()
    for _, doc in _documents():
        for node in _walk(doc):
            if isinstance(node, dict):
                names.update(k for k in node if isinstance(k, str) and k.startswith("LAGGARD_"))
                if isinstance(node.get("name"), str) and node["name"].startswith("LAGGARD_"):
                    names.add(node["name"])
    return names


def test_the_manifests_contain_commands_and_settings() -> None:
    assert len(_commands()) >= 6 and len(_setting_names()) >= 8


@pytest.mark.parametrize(("source", "argv"), _commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_every_command_parses(source: str, argv: list[str]) -> None:
    result = CliRunner().invoke(cli, [*argv, "--help"])
    assert result.exit_code == 0, f"{source}: laggard {' '.join(argv)}: {result.output}"


def test_every_setting_name_is_a_setting() -> None:
    fields = {f"LAGGARD_{name.upper()}" for name in Settings.model_fields}
    assert _setting_names() <= fields, sorted(_setting_names() - fields)
