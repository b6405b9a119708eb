"""The server of a load test, in a process of its own so its memory can be measured from outside.

    python fuzz/serve_child.py MODEL.gguf --parallel 4 --queue 4 --ctx-size 256 --threads 1

Binds 127.0.0.1 on a free port, prints the server's URL on one line of stdout once it is ready, and serves
until its stdin is closed (the parent ending, on purpose or not, also ends the server).
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--queue", type=int, default=4)
    p.add_argument("--ctx-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    import onewell
    from onewell.serve.app import create_app
    from onewell.serve.background import BackgroundServer

    model = onewell.load(args.model, backend="native", threads=args.threads, n_ctx=args.ctx_size)
    app = create_app(model, parallel=args.parallel, queue=args.queue, model_name="load-test", threads=args.threads)
    server = BackgroundServer(app, host="127.0.0.1").start()
    print(server.url, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
