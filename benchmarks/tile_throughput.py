"""Single-thread prefill matmul throughput per weight type: multiply-accumulates per cycle on real weights.

A prefill step multiplies each weight matrix by a batch of activation vectors (the executor's max_batch, 64), so
its speed is arithmetic, not bandwidth: this times one matmul of each weight type of MODEL against N_VEC random
vectors (activation quantization excluded) and prints GMAC/s, MACs per cycle at --ghz and cycles per 32
elements per vector. Where the type has a tile kernel it runs that; else the decode dot once per vector.
--variants takes knob settings (JSON objects of _core switches: rows_gemm, wide_tiles, float_gemm, ...), timed in
turn within each repetition, each printed with its median time's ratio to the first variant's.
    python benchmarks/tile_throughput.py [MODEL] [--n-vec 64] [--paths avx2] [--reps 5] [--ghz 2.95]
    python benchmarks/tile_throughput.py --types Q4_K,Q6_K --n-vec 128 --variants '{"rows_gemm": 0}' '{"rows_gemm": 1}'
"""
import argparse
import json
import statistics

import numpy as np

from onewell._native import _core
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.runtime.native_kernels import available_paths, matmul_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--paths", default=",".join(p for p in available_paths() if p != "generic"))
    ap.add_argument("--n-vec", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ghz", type=float, default=2.95, help="core clock, only to print MACs per cycle")
    ap.add_argument("--types", default="", help="comma-separated type names to time (default: all)")
    ap.add_argument("--variants", nargs="+", type=json.loads, default=[{}],
                    help="knob settings to time in turn, e.g. '{\"rows_gemm\": 0}' (default: as they are)")
    args = ap.parse_args()
    reader = GGUFReader(ensure_model(args.model))
    by_key = {}   # (type, cols) -> the largest such tensor
    for t in reader.tensors.values():
        key = (t.ggml_type, t.dims[0])
        if len(t.dims) == 2 and (key not in by_key or t.nbytes > by_key[key].nbytes):
            by_key[key] = t
    wanted = {s.lower() for s in args.types.split(",") if s}
    rng = np.random.default_rng(0)
    print(f"{'tensor':26} {'type':6} {'cols':>5} {'rows':>6} {'path':10} {'GMAC/s':>7} {'MAC/cyc':>7} "
          f"{'cyc/32/vec':>10} {'spread':>6}")
    for (wt, cols), t in sorted(by_key.items(), key=lambda kv: (kv[0][0].name, kv[0][1])):
        if wanted and wt.name.lower() not in wanted:
            continue
        rows = t.dims[1]
        x = rng.standard_normal((args.n_vec, cols)).astype(np.float32)
        raw = reader.tensor_data(t.name)
        macs = rows * cols * args.n_vec
        for path in args.paths.split(","):
            times = {i: [] for i in range(len(args.variants))}
            for rep in range(args.reps + 1):   # the first round warms up
                for i, variant in enumerate(args.variants):
                    before = {k: getattr(_core, k)(v) for k, v in variant.items()}
                    try:
                        t_run = matmul_bench(raw, wt, rows, cols, x, 1, isa=path)
                    finally:
                        for k, v in before.items():
                            getattr(_core, k)(v)
                    if rep:
                        times[i].append(t_run)
            first = statistics.median(times[0])
            for i, variant in enumerate(args.variants):
                med = statistics.median(times[i])
                gmac = macs / med / 1e9
                label = f" {json.dumps(variant)} x{first / med:.3f}" if len(args.variants) > 1 else ""
                print(f"{t.name:26} {wt.name:6} {cols:5} {rows:6} {path:10} {gmac:7.2f} {gmac / args.ghz:7.2f} "
                      f"{32 * args.ghz / gmac:10.2f} {100 * (max(times[i]) - min(times[i])) / med:5.0f}%{label}")

if __name__ == "__main__":
    main()
