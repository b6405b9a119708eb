"""Single-thread GB/s of the quantized matvec kernels on real weights (far larger than the caches).

Each kernel streams one weight matrix per call, as a decode step does; GB/s = weight bytes / time. Compare with
`onewell bandwidth --threads 1` (the ceiling). Usage:
    python benchmarks/kernel_bandwidth.py [MODEL] [--paths avx512,avx2,generic] [--reps 5]
"""
import argparse
import statistics

import numpy as np

from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.runtime.native_kernels import available_paths, matmul_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b-instruct:q8_0")
    ap.add_argument("--paths", default=",".join(available_paths()))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-mb", type=float, default=100.0, help="stream at least this much per timing")
    ap.add_argument("--n-vec", type=int, default=1)
    args = ap.parse_args()
    reader = GGUFReader(ensure_model(args.model))
    # one tensor per weight type: the largest of each, so the data cannot sit in cache
    by_type = {}
    for t in reader.tensors.values():
        if len(t.dims) == 2 and (t.ggml_type not in by_type or t.nbytes > by_type[t.ggml_type].nbytes):
            by_type[t.ggml_type] = t
    rng = np.random.default_rng(0)
    print(f"{'tensor':28} {'type':6} {'MB':>7} {'path':10} {'GB/s median':>11} {'min-max':>13}")
    for wt, t in sorted(by_type.items()):
        cols, rows = t.dims
        x = rng.standard_normal((args.n_vec, cols)).astype(np.float32)
        n_iter = max(1, int(args.min_mb * 1e6 / t.nbytes))
        for path in args.paths.split(","):
            matmul_bench(reader.tensor_data(t.name), wt, rows, cols, x, 1, isa=path)  # warm-up
            gbps = [t.nbytes * n_iter / matmul_bench(reader.tensor_data(t.name), wt, rows, cols, x, n_iter, isa=path) / 1e9
                    for _ in range(args.reps)]
            print(f"{t.name:28} {wt.name:6} {t.nbytes / 1e6:7.1f} {path:10} {statistics.median(gbps):11.1f} "
                  f"{min(gbps):6.1f}-{max(gbps):<6.1f}")


if __name__ == "__main__":
    main()
