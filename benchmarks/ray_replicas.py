"""Total tok/s of N concurrent greedy requests: the single server (--parallel 2) vs Ray Serve with 1 and 2 replicas.

    python benchmarks/ray_replicas.py [MODEL] [--threads 2] [--streams 4] [--max-tokens 64] [--reps 3]

Configurations, all on this machine with the same total threads (--threads):
  single      onewell serve --parallel 2 --threads T        (one engine, slots batched in one step)
  ray x1      --replicas 1 --parallel 2 --threads T        (the same engine behind Ray's proxy + ingress)
  ray x2      --replicas 2 --parallel 1 --threads T/2 each (two engines sharing one memory bus)
Each configuration runs --reps rounds of --streams requests at once (ignore_eos, so every request makes
--max-tokens tokens); the median total tok/s (prompt included in the time) is printed per configuration.
Ray starts once (local, num_cpus = this machine's) and is shut down at the end.
"""
from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import threading
import time

import httpx

PROMPTS = ["Write a Python function that reverses a string.", "Explain what a hash map is.",
           "List three prime numbers and say why they are prime.", "What does the HTTP status 404 mean?",
           "Write a haiku about memory bandwidth.", "Name the planets of the solar system.",
           "How do you sort a list in Python?", "What is a thread pool?"]


def one_request(url: str, prompt: str, max_tokens: int) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=600)
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


def round_tok_s(url: str, streams: int, max_tokens: int) -> float:
    counts = [0] * streams
    prompts = (PROMPTS * streams)[:streams]

    def run(i: int) -> None:
        counts[i] = one_request(url, prompts[i], max_tokens)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(streams)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if sum(counts) != streams * max_tokens:
        raise RuntimeError(f"expected {streams * max_tokens} tokens, got {sum(counts)}")
    return sum(counts) / (time.perf_counter() - t0)


def measure(url: str, args) -> list[float]:
    one_request(url, "warm up", 4)
    return [round_tok_s(url, args.streams, args.max_tokens) for _ in range(args.reps)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--threads", type=int, default=2, help="total threads; each of 2 replicas gets half")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx-size", type=int, default=1024)
    args = ap.parse_args()

    import onewell
    from onewell.hub import ensure_model
    from onewell.serve.app import create_app
    from onewell.serve.background import BackgroundServer

    path = str(ensure_model(args.model))
    results: dict[str, list[float]] = {}
    model = onewell.load(path, threads=args.threads, n_ctx=args.ctx_size)
    with BackgroundServer(create_app(model, parallel=2, queue=args.streams, threads=args.threads)) as server:
        results["single --parallel 2"] = measure(server.url, args)
    del model, server

    import ray
    from ray import serve

    from onewell.serve.ray_app import build_application
    from onewell.serve.ray_options import APP_NAME, RayServeOptions

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        half = max(args.threads // 2, 1)
        for label, replicas, parallel, threads in (("ray x1 --parallel 2", 1, 2, args.threads),
                                                   ("ray x2 --parallel 1", 2, 1, half)):
            options = RayServeOptions(model=path, replicas=replicas, parallel=parallel, queue=args.streams,
                                      threads=threads, ctx_size=args.ctx_size)
            serve.run(build_application(options), name=APP_NAME, route_prefix="/")
            results[label] = measure(f"http://127.0.0.1:{port}", args)
            serve.delete(APP_NAME)
    finally:
        serve.shutdown()
        ray.shutdown()

    print(f"{args.model}, {args.threads} threads in total, {args.streams} concurrent requests x "
          f"{args.max_tokens} tokens, {args.reps} rounds (median total tok/s, min-max):")
    base = statistics.median(results["single --parallel 2"])
    for label, rates in results.items():
        med = statistics.median(rates)
        print(f"  {label:22s} {med:7.1f} tok/s  ({min(rates):.1f}-{max(rates):.1f})  x{med / base:.2f}")


if __name__ == "__main__":
    main()
