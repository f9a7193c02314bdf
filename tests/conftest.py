"""Fixtures shared by both tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import Settings


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The public traces (setting LAGGARD_TRACES_DIR, default ../shared/traces); never copied into the repo."""
    path = Settings().traces_dir
    if not path.is_absolute():
        path = (Path(__file__).resolve().parent.parent / path).resolve()
    if not path.is_dir():
        pytest.fail(f"trace directory {path} not found: set LAGGARD_TRACES_DIR")
    return path
