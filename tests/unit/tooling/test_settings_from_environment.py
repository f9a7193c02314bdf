"""Settings as operators write them in environment variables and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import Settings


@pytest.mark.parametrize("raw", ["n1,n2", " n1 , n2 ", '["n1", "n2"]'])
def test_node_lists_are_comma_separated_or_json(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("LAGGARD_ALLOW_LIST", raw)
    assert Settings().allow_list == ["n1", "n2"]


def test_the_significance_floor_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAGGARD_SIGNIFICANCE_FLOOR", "none")
    assert Settings().significance_floor is None


def test_a_settings_file_is_read_and_the_environment_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "laggard.env"
    file.write_text("LAGGARD_MIN_TASKS=9\nLAGGARD_CLUSTER_ID=from-file\n")
    monkeypatch.setenv("LAGGARD_CLUSTER_ID", "from-env")
    settings = Settings(_env_file=file)  # type: ignore[call-arg]
    assert (settings.min_tasks, settings.cluster_id) == (9, "from-env")
