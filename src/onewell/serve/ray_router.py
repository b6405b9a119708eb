"""Ray Serve request router of the engine deployment: prefix affinity, else least-loaded.

Ray Serve's custom request router API (ray.serve.request_router, alpha in Ray 2.60): the router lives in
the handle of each caller (our ingress) and ranks the candidate replicas for every request; Ray then sends
the request to a replica of the first rank that has room (queue length below max_ongoing_requests),
trying the next rank otherwise. Each rank here is one replica, in this order:

  1. the replica that last received a prompt sharing the longest prefix with this one (its KV cache likely
     still holds it), if it has a free slot (fewer requests than --parallel);
  2. the others, least-loaded first (ongoing requests this router sent, or Ray's cached queue length).

Each replica also reports its scheduler metrics as routing stats (EngineReplica.record_routing_stats); the
router keeps the latest for /health and /metrics of the ingress (ray_reports.py).
"""
from __future__ import annotations

import random
from typing import List, Optional

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from onewell.serve import ray_reports  # by name: this module itself reaches the router by value
from onewell.serve.ray_prefix import PrefixTable, preferred_replica


def replica_key(replica_id: ReplicaID) -> str:
    return replica_id.unique_id


class PrefixAffinityRouter(RequestRouter):
    def initialize_state(self, parallel: int = 1, **kwargs) -> None:
        self.parallel = parallel
        self.table = PrefixTable()
        self.in_flight: dict[str, int] = {}  # requests this router sent and that have not completed, per replica

    def _loads(self, replicas: List[RunningReplica]) -> dict[str, int]:
        """Ongoing requests per replica: ours, or Ray's cached queue length if larger (other callers')."""
        cache = self.replica_queue_len_cache
        loads = {}
        for r in replicas:
            key = replica_key(r.replica_id)
            cached = cache.get(r.replica_id)
            loads[key] = max(self.in_flight.get(key, 0), cached or 0)
        return loads

    @staticmethod
    def _remember(replicas: List[RunningReplica]) -> None:
        ray_reports.remember((replica_key(r.replica_id), r.node_id, r.routing_stats) for r in replicas)

    def update_replicas(self, replicas: List[RunningReplica]) -> None:
        super().update_replicas(replicas)
        self._remember(replicas)  # routing stats arrive with these updates
        live = {replica_key(r.replica_id) for r in replicas}
        for gone in self.table.owners() - live:
            self.table.forget(gone)
        self.in_flight = {k: v for k, v in self.in_flight.items() if k in live}

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        loads = self._loads(candidate_replicas)
        # least-loaded first; equal loads in random order, so ties do not all land on the first replica
        ranked = sorted(candidate_replicas, key=lambda r: (loads[replica_key(r.replica_id)], random.random()))
        keys = _prefix_keys_of(pending_request)
        chosen = preferred_replica(self.table, keys, loads, self.parallel) if keys else None
        if chosen is not None:
            ranked.sort(key=lambda r: replica_key(r.replica_id) != chosen)  # stable: the rest stay in order
        return [[r] for r in ranked]  # Ray takes the first with room (below max_ongoing_requests)

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result) -> None:
        key = replica_key(replica_id)
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        keys = _prefix_keys_of(pending_request)
        if keys:
            self.table.record(keys, key)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        key = replica_key(replica_id)
        if self.in_flight.get(key, 0) > 0:
            self.in_flight[key] -= 1


def _prefix_keys_of(pending_request: Optional[PendingRequest]) -> list[bytes]:
    if pending_request is None or not pending_request.args:
        return []
    return list(getattr(pending_request.args[0], "prefix_keys", ()) or ())
