"""Throughput of N concurrent greedy streams vs the same N requests one after another, through the HTTP server.

With the native backend the server advances all active slots in one batched step (each weight read once for
all of them), so N concurrent streams should deliver more tokens per second in total than N sequential ones.

    python benchmarks/serve_throughput.py [MODEL] [--streams 4] [--max-tokens 64] [--threads 2] [--reps 3]
"""
import argparse
import statistics
import threading
import time

import httpx

import onewell
from onewell.serve.app import create_app
from onewell.serve.background import BackgroundServer

PROMPTS = ["Write a Python function that reverses a string.", "Explain what a hash map is.",
           "List three prime numbers and say why they are prime.", "What does the HTTP status 404 mean?",
           "Write a haiku about memory bandwidth.", "Name the planets of the solar system.",
           "How do you sort a list in Python?", "What is a thread pool?"]


def one_request(url: str, prompt: str, max_tokens: int) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": False, "ignore_eos": True}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


def concurrent(url: str, prompts: list[str], max_tokens: int) -> tuple[int, float]:
    counts = [0] * len(prompts)

    def run(i: int) -> None:
        counts[i] = one_request(url, prompts[i], max_tokens)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts), time.perf_counter() - t0


def sequential(url: str, prompts: list[str], max_tokens: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = sum(one_request(url, p, max_tokens) for p in prompts)
    return n, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    model = onewell.load(args.model, threads=args.threads)
    app = create_app(model, parallel=args.streams, queue=args.streams, threads=args.threads)
    prompts = (PROMPTS * args.streams)[:args.streams]
    rates = {"concurrent": [], "sequential": []}
    with BackgroundServer(app) as server:
        one_request(server.url, "warm up", 4)
        for _ in range(args.reps):  # interleaved: A B A B
            for name, fn in (("concurrent", concurrent), ("sequential", sequential)):
                n, sec = fn(server.url, prompts, args.max_tokens)
                rates[name].append(n / sec)
    c, s = statistics.median(rates["concurrent"]), statistics.median(rates["sequential"])
    print(f"{args.model}, {args.threads} threads, {args.streams} streams x {args.max_tokens} tokens, "
          f"{args.reps} interleaved reps (median total tok/s, prompt included in the time):")
    print(f"  concurrent {c:7.1f} tok/s  ({min(rates['concurrent']):.1f}-{max(rates['concurrent']):.1f})")
    print(f"  sequential {s:7.1f} tok/s  ({min(rates['sequential']):.1f}-{max(rates['sequential']):.1f})")
    print(f"  ratio {c / s:.2f}")


if __name__ == "__main__":
    main()
