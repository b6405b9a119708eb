"""What the engine replicas last reported (their routing stats), shared by the router and the ingress.

Its own module on purpose: Ray Serve ships the router's module to the process that routes *by value*
(cloudpickle), so state kept there would be a private copy; this module is imported by name instead, so
the router and the ingress's /health and /metrics see the same table.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Iterable

_lock = threading.Lock()  # the router runs on Ray's router loop thread, the ingress on its own
_reports: dict[str, dict[str, Any]] = {}  # replica id -> {"node": ..., "stats": {...}, "seen": monotonic}


def remember(replicas: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
    """The current replica set as (id, node id, routing stats); replicas not in it are dropped."""
    now = time.monotonic()
    fresh = {rid: {"node": node, "stats": dict(stats or {}), "seen": now} for rid, node, stats in replicas}
    with _lock:
        _reports.clear()
        _reports.update(fresh)


def replica_reports() -> dict[str, dict[str, Any]]:
    with _lock:
        return {k: dict(v) for k, v in _reports.items()}
