"""Webhook: POST each blacklist change as one JSON document.

The body is the delta (or, after a resynchronisation, the snapshot) with every field of the record, plus
``kind`` ("delta" or "snapshot") and ``blacklist`` (the whole list after the change), for example::

    {"kind": "delta", "cluster_id": "prod", "version": 8, "added": [{"node_id": "n7", "reason": ..., ...}],
     "removed": [...], "blacklist": ["n3", "n7"], ...}

Delivery is at least once: a POST is retried with exponential backoff until the endpoint answers 2xx; only
then does the consumer advance the applied version, so a restart resumes at the first change not delivered.
A crash between the 2xx and the state write re-sends that change, so receivers should deduplicate by
(``cluster_id``, ``kind``, ``version``), also sent as the ``Idempotency-Key`` header.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import orjson

from adapters.base import ApplyError, prefix
from adapters.follower import Change

log = logging.getLogger("laggard.adapters")


def payload(change: Change) -> dict[str, Any]:
    """The JSON document POSTed for ``change``."""
    return {"kind": change.source, **dataclasses.asdict(change.record), "blacklist": sorted(change.after)}


class WebhookApplier:
    """POSTs each change to ``url``: up to ``attempts`` tries, backing off exponentially."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        timeout_s: float = 10.0,
        dry_run: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.url = url
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self.dry_run = dry_run
        self.sleep = sleep

    def apply(self, change: Change) -> None:
        body = orjson.dumps(payload(change))
        log.info(
            "%sPOST %s version %d to %s (%d bytes)",
            prefix(self.dry_run),
            change.source,
            change.version,
            self.url,
            len(body),
        )
        if self.dry_run:
            return
        key = f"{change.cluster_id}/{change.source}/{change.version}"
        delay = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            problem = self._post(body, key)
            if problem is None:
                return
            if attempt == self.attempts:
                raise ApplyError(f"POST {self.url} failed {attempt} time(s), last: {problem}")
            log.warning(
                "POST %s failed (%s); attempt %d of %d in %.1f s",
                self.url,
                problem,
                attempt + 1,
                self.attempts,
                delay,
            )
            self.sleep(delay)
            delay = min(delay * 2, self.max_backoff_s)

    def known_nodes(self) -> frozenset[str] | None:
        return None

    def _post(self, body: bytes, key: str) -> str | None:
        """None on a 2xx answer, else what went wrong."""
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Idempotency-Key": key, "User-Agent": "laggard"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"{type(exc).__name__}: {reason}"
        return None if 200 <= status < 300 else f"HTTP {status}"
