"""Embeddings per second: onewell's /v1/embeddings against llama.cpp's llama-server (`--embedding --pooling
mean`) on the same model file and the same texts, over HTTP on both sides, interleaved (onewell, llama.cpp,
onewell, ...), several repetitions; prints each rep and the median of the per-rep ratios onewell / llama.cpp.

Texts: the golden ones (tests/data/embed_nomic-embed-text-v1.5-f16.jsonl, 6 texts of 9-19 tokens), repeated
--copies times in one request (each side gets the whole list at once: onewell packs it into one forward step,
llama-server spreads it over its --parallel slots and batches them). Each server's vectors are checked against
the other's (cosine) so a fast wrong answer cannot win. Both servers run with --threads threads.

    python benchmarks/embeddings_vs_llamacpp.py --threads 2 --reps 7 --copies 8
    python benchmarks/embeddings_vs_llamacpp.py --reps 1 --copies 1          # smoke check
    python benchmarks/embeddings_vs_llamacpp.py --isa avx2                    # both AVX2 paths, on any x86 CPU

--isa avx2|avxvnni compares one ISA path on both sides: onewell's server runs with ONEWELL_ISA set, llama-server is
the build for that ISA (benchmarks/llamacpp_build.sh --isa, AVX-512 off).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from onewell.hub import ensure_model

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "embed_nomic-embed-text-v1.5-f16.jsonl"


def built_llama_server(isa: str) -> Path:
    """llama-server 11434 built for this CPU and ISA (built, or rebuilt for another CPU, by llamacpp_build.sh)"""
    out = subprocess.run(["bash", str(ROOT / "benchmarks" / "llamacpp_build.sh"), "--isa", isa, "llama-server"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return Path(out.strip())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with status {proc.returncode} before it was ready")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{what} was not ready after {timeout:.0f} s")


def embed(url: str, texts: list[str]) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    r = httpx.post(url + "/v1/embeddings", json={"input": texts, "encoding_format": "float"}, timeout=600)
    seconds = time.perf_counter() - t0
    r.raise_for_status()
    data = sorted(r.json()["data"], key=lambda d: d["index"])
    return seconds, np.array([d["embedding"] for d in data], dtype=np.float64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="nomic-embed-text-v1.5", help="registry name or .gguf path")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--copies", type=int, default=8, help="the golden texts repeated this often per request")
    ap.add_argument("--isa", choices=("native", "avx2", "avxvnni"), default="native",
                    help="the ISA path both sides run (onewell: ONEWELL_ISA; llama.cpp: the build for it)")
    ap.add_argument("--llama-server", type=Path, help="default: the build for --isa (benchmarks/llamacpp_build.sh)")
    ap.add_argument("--llama-parallel", type=int, default=4, help="llama-server --parallel slots")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args()

    model = ensure_model(args.model)
    args.llama_server = args.llama_server or built_llama_server(args.isa)
    texts = [json.loads(line)["text"] for line in GOLDEN.read_text().splitlines() if line.strip()] * args.copies
    ow_port, ll_port = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.isa != "native":
        env["ONEWELL_ISA"] = args.isa
    procs = {
        "onewell": subprocess.Popen([sys.executable, "-m", "onewell", "serve", str(model), "--port", str(ow_port),
                                     "--threads", str(args.threads), "--log-level", "warning"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env),
        "llama.cpp": subprocess.Popen([str(args.llama_server), "-m", str(model), "--embedding", "--pooling", "mean",
                                       "--port", str(ll_port), "-t", str(args.threads), "-tb", str(args.threads),
                                       "-c", str(2048 * args.llama_parallel), "-b", "2048", "-ub", "2048",
                                       "--parallel", str(args.llama_parallel)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    urls = {"onewell": f"http://127.0.0.1:{ow_port}", "llama.cpp": f"http://127.0.0.1:{ll_port}"}
    try:
        for name, proc in procs.items():
            wait_ready(urls[name], proc, name)
        for name in urls:   # warm-up: page in the weights, first-call allocations
            embed(urls[name], texts[:6])
        rows, ratios = [], []
        for rep in range(args.reps):
            rate, vectors = {}, {}
            for name in urls:
                seconds, vectors[name] = embed(urls[name], texts)
                rate[name] = len(texts) / seconds
            cos = np.sum(vectors["onewell"] * vectors["llama.cpp"], axis=1) / (
                np.linalg.norm(vectors["onewell"], axis=1) * np.linalg.norm(vectors["llama.cpp"], axis=1))
            ratio = rate["onewell"] / rate["llama.cpp"]
            ratios.append(ratio)
            rows.append({"rep": rep, "onewell_per_s": rate["onewell"], "llamacpp_per_s": rate["llama.cpp"],
                         "ratio": ratio, "min_cosine": float(cos.min())})
            print(f"rep {rep}: onewell {rate['onewell']:.1f}/s  llama.cpp {rate['llama.cpp']:.1f}/s  "
                  f"ratio {ratio:.2f}  min cosine {cos.min():.5f}", flush=True)
        summary = {"inputs_per_request": len(texts), "threads": args.threads, "isa": args.isa, "reps": rows,
                   "median_ratio": statistics.median(ratios),
                   "median_onewell_per_s": statistics.median(r["onewell_per_s"] for r in rows),
                   "median_llamacpp_per_s": statistics.median(r["llamacpp_per_s"] for r in rows)}
        print(f"median: onewell {summary['median_onewell_per_s']:.1f} embeddings/s, llama.cpp "
              f"{summary['median_llamacpp_per_s']:.1f}/s, median ratio {summary['median_ratio']:.2f} "
              f"({len(texts)} inputs per request, {args.threads} threads, ISA {args.isa})")
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2) + "\n")
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
