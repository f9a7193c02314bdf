"""A wheel of laggard installed outside the checkout finds its Avro schemas (the image's `pip install .`).

The Dockerfile installs the project as a wheel; the codec looked for ``schemas/`` beside the package, which in
site-packages does not exist, so every command that encodes or decodes an event (replay, worker, adapters) ended
with FileNotFoundError in the image. This builds the wheel as pip builds it for the image (PEP 517, its build
requirements fetched from the package index as in ``make venv``), installs it under a fresh prefix and replays
from a directory with no checkout in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson

from streams.serde.codec import schema_dir

REPO = Path(__file__).resolve().parents[3]


def test_a_wheel_installed_under_a_prefix_replays_without_the_checkout(tmp_path: Path) -> None:
    wheels, prefix, elsewhere = tmp_path / "wheels", tmp_path / "prefix", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    source = tmp_path / "source"  # built from a copy: setuptools leaves build/ in the tree it builds
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("schemas", "streams", "producers", "adapters", "laggard"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)], check=True, timeout=600)
    (wheel,) = wheels.glob("laggard-*.whl")
    # --ignore-installed: without it pip first uninstalls the environment's own laggard (make venv's editable
    # install, its console script with it), whatever --prefix says
    subprocess.run([*pip, "install", "--no-deps", "--ignore-installed", "--prefix", str(prefix), str(wheel)],
                   check=True, timeout=300)
    site = next(prefix.glob("lib/python3*/site-packages"))
    assert (prefix / "share" / "laggard" / "schemas" / "previous").is_dir()
    # The wheel's packages first (the test environment's editable install maps them to the checkout otherwise);
    # the dependencies come from this environment, as the image's come from requirements.lock.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
            "import streams.serde.codec as c; print(c.__file__); print(c.SCHEMA_DIR); "
            "from laggard.cli import main; sys.argv = ['laggard'] + sys.argv[1:]; main()")
    result = subprocess.run(
        [sys.executable, "-c", code, "replay", "--trace", "synthetic:nodes=4,slow=1,jobs=2", "--sink", "stdout",
         "--limit", "3"],
        cwd=elsewhere, env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    module, schemas, *records = result.stdout.splitlines()
    assert module.startswith(str(site)), module  # the installed copy ran, not the checkout
    assert Path(schemas) == prefix / "share" / "laggard" / "schemas"
    events = [orjson.loads(line) for line in records]
    assert len(events) == 3 and {"job_id", "type"} <= events[0].keys(), records
    assert (Path(sys.executable).parent / "laggard").exists(), "the test environment lost its own laggard"


def test_the_checkout_wins_and_a_missing_copy_names_the_checkout(tmp_path: Path) -> None:
    """From a checkout (``make venv``'s editable install) the schemas are the checkout's own; with none anywhere,
    the error names the checkout's ``schemas/``, where a developer looks first."""
    module = REPO / "streams" / "serde" / "codec.py"
    assert schema_dir(module, tmp_path) == REPO / "schemas"
    lone = tmp_path / "lib" / "python3.11" / "site-packages" / "streams" / "serde" / "codec.py"
    assert schema_dir(lone, tmp_path / "nowhere") == tmp_path / "lib" / "python3.11" / "site-packages" / "schemas"
