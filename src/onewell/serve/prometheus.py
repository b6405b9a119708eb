"""The server's metrics (the JSON of GET /metrics) in Prometheus' text format, via prometheus_client.

One sample set per engine: the single server has one (no labels), a Ray deployment one per replica,
labelled `replica="<id>"`. Counters are the totals the scheduler keeps since start; the rest are gauges.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

PREFIX = "onewell_"
# name -> help; every other numeric key of the metrics JSON is exported as a gauge
COUNTERS = {
    "requests_served": "requests answered in full",
    "requests_rejected": "requests refused with 503 because the queue was full",
    "requests_cancelled": "requests whose client left before the end",
    "requests_failed": "requests that ended with a server error",
    "requests_invalid": "requests refused with a 4xx",
    "prompt_tokens_evaluated": "prompt tokens run through the model",
    "prompt_tokens_cached": "prompt tokens reused from a slot's KV cache",
    "tokens_generated": "tokens generated",
    "ticks": "scheduler steps",
}
GAUGE_HELP = {
    "slots": "generation slots (--parallel)",
    "active_slots": "slots generating now",
    "queue_length": "requests waiting for a slot",
    "queue_capacity": "requests that may wait (--queue)",
    "kv_tokens_in_use": "tokens held in the slots' KV caches",
    "kv_tokens_capacity": "KV cache capacity in tokens, all slots",
}


class _Snapshot:
    """A collector over fixed samples: [(labels, metrics dict)]."""

    def __init__(self, samples: list[tuple[Mapping[str, str], Mapping[str, object]]]):
        self.samples = samples

    def collect(self) -> Iterable:
        label_names = sorted({k for labels, _ in self.samples for k in labels})
        names = sorted({k for _, m in self.samples for k, v in m.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)})
        for name in names:
            if name in COUNTERS:
                family = CounterMetricFamily(PREFIX + name, COUNTERS[name], labels=label_names)
            else:
                family = GaugeMetricFamily(PREFIX + name, GAUGE_HELP.get(name, name.replace("_", " ")),
                                           labels=label_names)
            for labels, m in self.samples:
                if name in m:
                    family.add_metric([str(labels.get(k, "")) for k in label_names], float(m[name]))
            yield family


def render(samples: list[tuple[Mapping[str, str], Mapping[str, object]]]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(samples))
    return generate_latest(registry)


def wants_prometheus(accept: str, query_format: str | None) -> bool:
    """`?format=prometheus|json` decides; else the Accept header: Prometheus asks for openmetrics or
    text/plain, a browser or plain HTTP client (*/*, application/json) gets the JSON."""
    if query_format:
        return query_format.lower() in ("prometheus", "text")
    accept = accept.lower()
    if "application/json" in accept:
        return False
    return "application/openmetrics-text" in accept or "text/plain" in accept


__all__ = ["CONTENT_TYPE_LATEST", "render", "wants_prometheus"]
