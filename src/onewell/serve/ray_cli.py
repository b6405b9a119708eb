"""`onewell serve MODEL --replicas N ...`: from parsed arguments to a running Ray Serve application.

Ray is an optional extra: it is imported here only, and its absence is one clear line, not a traceback.
"""
from __future__ import annotations

import argparse

from onewell.errors import OnewellError
from onewell.serve.ray_options import apply_config_file, options_from_args

MISSING_RAY = "`onewell serve --replicas` runs on Ray Serve, which is not installed: pip install 'onewell[ray]'"


def load_ray_app():
    """onewell.serve.ray_app (which imports ray.serve), or a clear OnewellError without Ray."""
    try:
        from onewell.serve import ray_app
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("ray", "prometheus_client", "yaml"):
            raise OnewellError(f"{MISSING_RAY} (missing: {e.name})") from None
        raise
    return ray_app


def serve_on_ray(args: argparse.Namespace) -> int:
    from onewell.serve.app import build_parser

    apply_config_file(args, build_parser())
    options = options_from_args(args)
    ray_app = load_ray_app()
    ray_app.run(options, address=args.ray_address, host=args.host, port=args.port)
    return 0
