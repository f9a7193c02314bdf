"""The deployment files pass the real offline validators `make manifests` runs, and those validators do refuse a
broken file (a check that cannot fail would prove nothing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def _k8s(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "kubernetes-validate"), "--strict", "--quiet", *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def _compose(file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(file)],
                          capture_output=True, text=True, timeout=120)


def test_k8s_manifests_and_compose_file_are_valid_and_kustomization_names_them_all() -> None:
    manifests = sorted(p for p in (REPO / "k8s").glob("*.yaml") if p.name != "kustomization.yaml")
    demos = sorted((REPO / "k8s" / "demo").glob("*.yaml"))  # applied by hand, never by the kustomization
    assert demos and _k8s(*manifests, *demos).returncode == 0, _k8s(*manifests, *demos).stdout
    assert _compose(REPO / "docker-compose.yml").returncode == 0
    listed = yaml.safe_load((REPO / "k8s" / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == [p.name for p in manifests]


def test_the_validators_refuse_a_broken_probe_and_an_unknown_compose_key(tmp_path: Path) -> None:
    worker = (REPO / "k8s" / "worker.yaml").read_text()
    assert "path: /livez, port: metrics}, periodSeconds: 10" in worker, "the worker has a liveness probe"
    broken = tmp_path / "worker.yaml"
    broken.write_text(worker.replace("path: /livez, port: metrics}, periodSeconds: 10",
                                     "path: /livez, port: metrics}, periodSeconds: ten"))
    refused = _k8s(broken)
    assert refused.returncode != 0 and "periodSeconds" in refused.stdout + refused.stderr
    compose = tmp_path / "docker-compose.yml"
    shutil.copy(REPO / "docker-compose.yml", compose)
    compose.write_text(compose.read_text().replace("    restart: unless-stopped\n", "    restrat: unless-stopped\n", 1))
    assert _compose(compose).returncode != 0
