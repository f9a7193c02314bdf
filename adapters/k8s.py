"""Kubernetes: taint blacklisted nodes with laggard's own key, and remove only the taints laggard added.

Every node laggard taints also gets the annotation ``laggard.io/tainted-by: laggard/<cluster id>``; a taint
is removed only from a node carrying that annotation, so a taint an operator set by hand stays. Each patch is
a JSON merge patch that carries the ``metadata.resourceVersion`` the node was read at, so the API server
rejects it with 409 Conflict if anything changed the node in between (the taints list is replaced whole);
on 409 the adapter re-reads the node and retries with exponential backoff. After a resynchronisation from
the snapshot, nodes that still carry laggard's annotation but are no longer blacklisted are released too,
which repairs a lost state file. The cap's known nodes are the nodes the API lists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from adapters.base import ApplyError, prefix
from adapters.follower import Change

log = logging.getLogger("laggard.adapters")

OWNER_ANNOTATION = "laggard.io/tainted-by"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Taint:
    """A node taint ``KEY=VALUE:EFFECT``."""

    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """``laggard.io/slow=true:NoSchedule`` -> Taint; ValueError with the reason otherwise."""
        key_value, colon, effect = text.rpartition(":")
        key, _, value = key_value.partition("=")
        if not colon or not key or effect not in {"NoSchedule", "PreferNoSchedule", "NoExecute"}:
            raise ValueError(
                f"taint {text!r} is not KEY=VALUE:EFFECT with EFFECT one of NoSchedule, PreferNoSchedule, NoExecute"
            )
        return cls(key, value, effect)

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


DEFAULT_TAINT = Taint("laggard.io/slow", "true", "NoSchedule")


class K8sApplier:
    """Adds and removes laggard's taint through the Kubernetes API, guarded by resourceVersion."""

    name = "k8s"

    def __init__(
        self,
        api: CoreV1Api,
        cluster_id: str,
        taint: Taint = DEFAULT_TAINT,
        attempts: int = 5,
        backoff_s: float = 0.2,
        dry_run: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api
        self.owner = f"laggard/{cluster_id}"
        self.taint = taint
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.dry_run = dry_run
        self.sleep = sleep

    def known_nodes(self) -> frozenset[str] | None:
        return frozenset(node.metadata.name for node in self._list())

    def apply(self, change: Change) -> None:
        release = {entry.node_id for entry in change.removed}
        if change.source == "snapshot":
            release |= {
                node.metadata.name for node in self._list() if _annotations(node).get(OWNER_ANNOTATION) == self.owner
            } - change.after
        for node in sorted(change.after):
            self._guarded(node, self._taint_patch)
        for node in sorted(release - change.after):
            self._guarded(node, self._release_patch)

    def _list(self) -> list[Any]:
        try:
            return list(self._reach(self.api.list_node).items)
        except ApiException as exc:
            raise ApplyError(f"cannot list nodes: HTTP {exc.status} {exc.reason}") from exc

    def _reach(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call`` to the API server; one that cannot reach it (refused, unresolvable, TLS, timed out after the
        client's retries) is a change the scheduler did not take, retried like any other, not a crash."""
        try:
            return call(*args, **kwargs)
        except HTTPError as exc:  # urllib3's: MaxRetryError, ProtocolError, SSLError, ...
            host = getattr(self.api.api_client.configuration, "host", "?")
            cause = getattr(exc, "reason", None) or exc
            raise ApplyError(f"cannot reach the Kubernetes API at {host}: {type(cause).__name__}: {cause}") from exc

    def _guarded(self, name: str, make_patch: Callable[[Any], dict[str, Any] | None]) -> None:
        """Read the node, build a patch at its resourceVersion, send it; on 409 read again and retry."""
        delay = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                node: Any = self._reach(self.api.read_node, name)
            except ApiException as exc:
                if exc.status == 404:
                    log.warning("node %s is not in the Kubernetes API: nothing to do for it", name)
                    return
                raise ApplyError(f"cannot read node {name}: HTTP {exc.status} {exc.reason}") from exc
            patch = make_patch(node)
            if patch is None:
                return
            patch.setdefault("metadata", {})["resourceVersion"] = node.metadata.resource_version
            if self.dry_run:
                return
            try:
                self._reach(self.api.patch_node, name, patch, _content_type=MERGE_PATCH)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise ApplyError(f"cannot patch node {name}: HTTP {exc.status} {exc.reason}") from exc
            log.warning(
                "node %s changed under us (409 Conflict); re-reading, attempt %d of %d in %.1f s",
                name,
                attempt + 1,
                self.attempts,
                delay,
            )
            if attempt < self.attempts:
                self.sleep(delay)
                delay *= 2
        raise ApplyError(f"node {name} kept changing: {self.attempts} conflicting patches")

    def _taint_patch(self, node: Any) -> dict[str, Any] | None:
        taints = _taints(node)
        ours = _annotations(node).get(OWNER_ANNOTATION) == self.owner
        present = any(t["key"] == self.taint.key and t["effect"] == self.taint.effect for t in taints)
        if present and ours:
            return None
        if present:
            log.warning(
                "node %s already has taint %s set by someone else: leaving it alone",
                node.metadata.name,
                self.taint.key,
            )
            return None
        log.info("%sadd taint %s to node %s", prefix(self.dry_run), self.taint, node.metadata.name)
        return {
            "metadata": {"annotations": {OWNER_ANNOTATION: self.owner}},
            "spec": {"taints": [*taints, self.taint.as_dict()]},
        }

    def _release_patch(self, node: Any) -> dict[str, Any] | None:
        if _annotations(node).get(OWNER_ANNOTATION) != self.owner:
            log.info("node %s: laggard did not add its taint, leaving it", node.metadata.name)
            return None
        taints = _taints(node)
        kept = [t for t in taints if not (t["key"] == self.taint.key and t["effect"] == self.taint.effect)]
        log.info("%sremove taint %s from node %s", prefix(self.dry_run), self.taint, node.metadata.name)
        # null deletes the annotation in a merge patch; an empty taints list becomes null the same way.
        return {"metadata": {"annotations": {OWNER_ANNOTATION: None}}, "spec": {"taints": kept or None}}


def _annotations(node: Any) -> dict[str, str]:
    return dict(node.metadata.annotations or {})


def _taints(node: Any) -> list[dict[str, Any]]:
    """The node's taints as API dicts (camelCase keys), keeping fields laggard does not know."""
    result = []
    for taint in node.spec.taints or [] if node.spec else []:
        entry = {"key": taint.key, "effect": taint.effect}
        if taint.value is not None:
            entry["value"] = taint.value
        if getattr(taint, "time_added", None) is not None:
            entry["timeAdded"] = taint.time_added.isoformat().replace("+00:00", "Z")
        result.append(entry)
    return result
