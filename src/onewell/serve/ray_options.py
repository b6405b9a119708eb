"""`onewell serve --replicas N`: the command-line and YAML options of the Ray Serve path, checked and turned
into Serve deployment settings. Plain Python: importing this never imports Ray (serve/ray_app.py does).

    onewell serve MODEL --replicas 2 [--ray-address ADDR] [--threads T] [--min-replicas 1 --max-replicas 4]
                        [--target-ongoing-requests 2] [--replica-cpus C] [--config deploy.yaml]

A YAML file (--config) holds the same options by their long names (`max_replicas: 4` or `max-replicas: 4`);
a value given on the command line wins over the file's.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onewell.errors import OnewellError
from onewell.serve.arg_types import positive_float, positive_int
from onewell.serve.security import allowed_hosts_for

# Options a --config file may set (argparse dest names), with their types.
CONFIG_KEYS: dict[str, type] = {
    "replicas": int, "ray_address": str, "min_replicas": int, "max_replicas": int,
    "target_ongoing_requests": float, "replica_cpus": float, "threads": int, "parallel": int, "queue": int,
    "ctx_size": int, "host": str, "port": int, "name": str, "backend": str, "kv_type": str,
}
APP_NAME = "onewell"


def add_ray_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Ray Serve (pip install 'onewell[ray]'): replicas behind one endpoint")
    g.add_argument("--replicas", type=positive_int, default=None,
                   help="serve with N engine replicas on Ray Serve (each its own --threads and --parallel slots)")
    g.add_argument("--ray-address", default=None,
                   help="join this Ray cluster (e.g. auto, or HEAD_IP:6379); default: start a local Ray instance")
    g.add_argument("--min-replicas", type=int, default=None, help="autoscaling: fewest replicas (0 allowed)")
    g.add_argument("--max-replicas", type=positive_int, default=None, help="autoscaling: most replicas")
    g.add_argument("--target-ongoing-requests", type=positive_float, default=None,
                   help="autoscaling: requests per replica to aim for (default: --parallel)")
    g.add_argument("--replica-cpus", type=positive_float, default=None,
                   help="CPUs Ray reserves for each replica (default: --threads, else 1)")
    g.add_argument("--config", type=Path, default=None, help="YAML file with any of these options")


def wants_ray(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) is not None for k in
               ("replicas", "ray_address", "min_replicas", "max_replicas", "target_ongoing_requests", "config"))


def apply_config_file(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Fill options left at their default from the YAML file named by --config."""
    if args.config is None:
        return
    import yaml  # a dependency of ray[serve]; listed in the ray extra too

    try:
        data = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise OnewellError(f"cannot read --config {args.config}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise OnewellError(f"--config {args.config} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise OnewellError(f"--config {args.config} must hold a mapping of option: value")
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key not in CONFIG_KEYS:
            raise OnewellError(f"--config {args.config}: unknown option {raw_key!r} "
                               f"(known: {', '.join(sorted(CONFIG_KEYS))})")
        kind = CONFIG_KEYS[key]
        if value is not None and not (isinstance(value, kind) or (kind is float and isinstance(value, int))) \
                or isinstance(value, bool):
            raise OnewellError(f"--config {args.config}: {raw_key} must be a {kind.__name__}, got {value!r}")
        if getattr(args, key) == parser.get_default(key):
            setattr(args, key, value)


@dataclass(frozen=True)
class RayServeOptions:
    """Everything a replica and the deployment need; built once by the driver and shipped to replicas."""

    model: str
    replicas: int = 1
    min_replicas: int | None = None
    max_replicas: int | None = None
    target_ongoing_requests: float | None = None
    replica_cpus: float | None = None
    threads: int | None = None
    parallel: int = 1
    queue: int = 8
    ctx_size: int = 4096
    backend: str = "native"
    kv_type: str = "f16"
    api_key: tuple[str, ...] | None = None
    name: str | None = None
    allowed_hosts: tuple[str, ...] = ()  # the ingress passes clients' Host headers on to the replicas' allow-list
    share_prompt_cache: bool = False

    def __post_init__(self):
        object.__setattr__(self, "api_key", _keys(self.api_key))  # one key (a str) or several: always a tuple
        if self.replicas < 1:
            raise OnewellError(f"--replicas must be at least 1, got {self.replicas}")
        if self.parallel < 1 or self.queue < 0:
            raise OnewellError(f"--parallel must be >= 1 and --queue >= 0, got {self.parallel} and {self.queue}")
        if self.kv_type not in ("f32", "f16", "q8_0"):
            raise OnewellError(f"--kv-type must be f32, f16 or q8_0, got {self.kv_type!r}")
        if self.autoscaling:
            low, high = self.min_replicas_or_default, self.max_replicas_or_default
            if low < 0:
                raise OnewellError(f"--min-replicas must not be negative, got {low}")
            if high < 1 or low > high:
                raise OnewellError(f"autoscaling needs 0 <= --min-replicas <= --max-replicas and "
                                   f"--max-replicas >= 1, got {low} and {high}")
            if not low <= self.replicas <= high:
                raise OnewellError(f"--replicas {self.replicas} (the starting count) must lie within "
                                   f"--min-replicas {low} and --max-replicas {high}")

    @property
    def autoscaling(self) -> bool:
        return any(v is not None for v in (self.min_replicas, self.max_replicas, self.target_ongoing_requests))

    @property
    def min_replicas_or_default(self) -> int:
        return self.min_replicas if self.min_replicas is not None else min(1, self.replicas)

    @property
    def max_replicas_or_default(self) -> int:
        return self.max_replicas if self.max_replicas is not None else self.replicas

    @property
    def capacity(self) -> int:
        """Requests one replica holds before its own scheduler answers 503: its slots and its queue."""
        return self.parallel + self.queue

    def engine_deployment_settings(self) -> dict[str, Any]:
        """Keyword arguments for the engine deployment's `.options()` (the request router is added by
        ray_app.py, which imports Ray)."""
        settings: dict[str, Any] = {
            # One over the replica's capacity: Ray routes to the least-loaded replica that has room, and only
            # when every replica is full does one more request reach a replica, whose own scheduler answers
            # it with the usual 503 + Retry-After: the single server's queue behaviour, end to end.
            "max_ongoing_requests": self.capacity + 1,
            # Requests waiting in Ray for a replica with room beyond that get 503 from the ingress at once.
            "max_queued_requests": max(self.queue, 1),
            "ray_actor_options": {"num_cpus": self.replica_cpus if self.replica_cpus is not None
                                  else float(self.threads or 1)},
        }
        if self.autoscaling:
            settings["autoscaling_config"] = {
                "min_replicas": self.min_replicas_or_default,
                "max_replicas": self.max_replicas_or_default,
                "initial_replicas": self.replicas,
                "target_ongoing_requests": self.target_ongoing_requests or float(self.parallel),
            }
        else:
            settings["num_replicas"] = self.replicas
        return settings


def options_from_args(args: argparse.Namespace) -> RayServeOptions:
    replicas = args.replicas
    if replicas is None:
        replicas = args.min_replicas if args.min_replicas not in (None, 0) else 1
    return RayServeOptions(
        model=str(args.model), replicas=replicas, min_replicas=args.min_replicas, max_replicas=args.max_replicas,
        target_ongoing_requests=args.target_ongoing_requests, replica_cpus=args.replica_cpus,
        threads=args.threads, parallel=args.parallel, queue=args.queue, ctx_size=args.ctx_size,
        backend=args.backend, kv_type=getattr(args, "kv_type", "f16"), api_key=_keys(args.api_key),
        allowed_hosts=tuple(allowed_hosts_for(args.host, getattr(args, "allowed_host", None) or [])),
        share_prompt_cache=bool(getattr(args, "share_prompt_cache", False)),
        name=args.name or (Path(args.model).stem if str(args.model).endswith(".gguf") else str(args.model)))


def _keys(api_key: str | list[str] | None) -> tuple[str, ...] | None:
    if api_key is None:
        return None
    return (api_key,) if isinstance(api_key, str) else tuple(api_key)
