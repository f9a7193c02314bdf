"""The Kubernetes applier's decisions against an in-memory stand-in for CoreV1Api (no HTTP here).

The real client over HTTP is exercised by the contract test in tests/integration/test_adapters_on_kafka.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException

from adapters.base import ApplyError
from adapters.follower import Change
from adapters.k8s import OWNER_ANNOTATION, K8sApplier, Taint
from streams.core.events import BlacklistEntry, BlacklistSnapshot, RemovedEntry


class FakeApi:
    """Nodes as dicts; patch_node applies a JSON merge patch and checks the resourceVersion."""

    def __init__(self, names: list[str], conflicts: int = 0) -> None:
        self.nodes = {n: {"rv": 1, "annotations": {}, "taints": []} for n in names}
        self.conflicts = conflicts
        self.patches: list[tuple[str, dict]] = []

    def _view(self, name: str) -> SimpleNamespace:
        node = self.nodes[name]
        taints = [
            SimpleNamespace(key=t["key"], value=t.get("value"), effect=t["effect"], time_added=None)
            for t in node["taints"]
        ]
        meta = SimpleNamespace(name=name, resource_version=str(node["rv"]), annotations=dict(node["annotations"]))
        return SimpleNamespace(metadata=meta, spec=SimpleNamespace(taints=taints or None))

    def list_node(self) -> SimpleNamespace:
        return SimpleNamespace(items=[self._view(n) for n in self.nodes])

    def read_node(self, name: str) -> SimpleNamespace:
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return self._view(name)

    def patch_node(self, name: str, body: dict, _content_type: str) -> None:
        assert _content_type == "application/merge-patch+json"
        node = self.nodes[name]
        if self.conflicts or body["metadata"]["resourceVersion"] != str(node["rv"]):
            self.conflicts = max(0, self.conflicts - 1)
            node["rv"] += 1  # someone else wrote the node meanwhile
            raise ApiException(status=409, reason="Conflict")
        self.patches.append((name, body))
        for key, value in body["metadata"].get("annotations", {}).items():
            if value is None:
                node["annotations"].pop(key, None)
            else:
                node["annotations"][key] = value
        if "taints" in body.get("spec", {}):
            node["taints"] = body["spec"]["taints"] or []
        node["rv"] += 1


def entry(node: str) -> BlacklistEntry:
    return BlacklistEntry(node, 0, 9, 1.0, 0.2, 0.8, 1.2, "slow")


def delta_change(before: set[str], after: set[str], version: int = 1) -> Change:
    added = tuple(entry(n) for n in sorted(after - before))
    removed = tuple(RemovedEntry(n, "recovered") for n in sorted(before - after))
    return Change("c1", version, "delta", added, removed, frozenset(before), frozenset(after), None)  # type: ignore[arg-type]


def test_taints_and_releases_only_its_own_nodes() -> None:
    api = FakeApi(["a", "b", "c"])
    api.nodes["c"]["taints"] = [{"key": "laggard.io/slow", "value": "true", "effect": "NoSchedule"}]  # by hand
    applier = K8sApplier(api, "c1", sleep=lambda s: None)
    applier.apply(delta_change(set(), {"a", "c"}))
    assert api.nodes["a"]["taints"] == [{"key": "laggard.io/slow", "value": "true", "effect": "NoSchedule"}]
    assert api.nodes["a"]["annotations"] == {OWNER_ANNOTATION: "laggard/c1"}
    assert api.nodes["c"]["annotations"] == {}  # someone else's taint: not claimed
    applier.apply(delta_change({"a", "c"}, set(), version=2))
    assert api.nodes["a"] == {"rv": api.nodes["a"]["rv"], "annotations": {}, "taints": []}
    assert api.nodes["c"]["taints"] != []  # the hand-made taint stays


def test_applying_twice_sends_no_second_patch() -> None:
    api = FakeApi(["a"])
    applier = K8sApplier(api, "c1")
    applier.apply(delta_change(set(), {"a"}))
    applier.apply(delta_change(set(), {"a"}))
    assert len(api.patches) == 1


def test_other_taints_are_kept() -> None:
    api = FakeApi(["a"])
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    api.nodes["a"]["taints"] = [gpu]
    applier = K8sApplier(api, "c1", taint=Taint.parse("laggard.io/slow=yes:PreferNoSchedule"))
    applier.apply(delta_change(set(), {"a"}))
    assert api.nodes["a"]["taints"] == [
        gpu,
        {"key": "laggard.io/slow", "value": "yes", "effect": "PreferNoSchedule"},
    ]
    applier.apply(delta_change({"a"}, set(), version=2))
    assert api.nodes["a"]["taints"] == [gpu]


def test_conflicts_are_retried_with_backoff_then_given_up() -> None:
    api = FakeApi(["a"], conflicts=2)
    waits: list[float] = []
    K8sApplier(api, "c1", backoff_s=0.1, sleep=waits.append).apply(delta_change(set(), {"a"}))
    assert waits == [0.1, 0.2] and api.nodes["a"]["annotations"]
    stubborn = FakeApi(["a"], conflicts=99)
    with pytest.raises(ApplyError, match="kept changing"):
        K8sApplier(stubborn, "c1", attempts=3, sleep=lambda s: None).apply(delta_change(set(), {"a"}))


def test_a_snapshot_releases_stale_taints_of_a_lost_state() -> None:
    api = FakeApi(["a", "b"])
    K8sApplier(api, "c1").apply(delta_change(set(), {"a", "b"}))
    snapshot = BlacklistSnapshot("c1", 9, 0, "pcores", 0, 1, (entry("b"),))
    # A fresh state (before = nothing) resynchronises from a snapshot that no longer lists a.
    K8sApplier(api, "c1").apply(Change("c1", 9, "snapshot", (entry("b"),), (), frozenset(), frozenset({"b"}), snapshot))
    assert api.nodes["a"]["taints"] == [] and api.nodes["b"]["taints"] != []


def test_unknown_nodes_are_skipped_and_known_nodes_come_from_the_api() -> None:
    api = FakeApi(["a", "b"])
    applier = K8sApplier(api, "c1")
    applier.apply(delta_change(set(), {"ghost"}))
    assert api.patches == []
    assert applier.known_nodes() == {"a", "b"}


def test_dry_run_reads_but_never_patches() -> None:
    api = FakeApi(["a"])
    K8sApplier(api, "c1", dry_run=True).apply(delta_change(set(), {"a"}))
    assert api.patches == [] and api.nodes["a"]["taints"] == []


@pytest.mark.parametrize("text", ["laggard.io/slow=true", "=x:NoSchedule", "k=v:Sometimes"])
def test_a_malformed_taint_says_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="KEY=VALUE:EFFECT"):
        Taint.parse(text)
