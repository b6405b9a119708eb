"""Single-thread GB/s of the quantized matvec kernels on real weights (far larger than the caches).

Each kernel streams one weight matrix per call, as a decode step does; GB/s = weight bytes / time. Compare with
`onewell bandwidth --threads 1` (the ceiling). With --repack, Q8_0 and Q5_0 tensors are also timed in the Q8_0
R16 layout the native backend repacks them into at load (onewell.quant.repack): "GB/s" counts the bytes actually
streamed (the repacked copy), "src GB/s" the original tensor's bytes per second (what decides tokens/s when
comparing layouts). Usage:
    python benchmarks/kernel_bandwidth.py [MODEL] [--paths avx512,avx2,generic] [--reps 5] [--repack]
        [--prefetch 0,4096,16384]   (software prefetch distances of the AVX-512 R16 kernel to compare)
"""
import argparse
import statistics

import numpy as np

from onewell._native import _core
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.runtime import native_repack
from onewell.runtime.native_kernels import available_paths, matmul_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b-instruct:q8_0")
    ap.add_argument("--paths", default=",".join(available_paths()))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-mb", type=float, default=100.0, help="stream at least this much per timing")
    ap.add_argument("--n-vec", type=int, default=1)
    ap.add_argument("--repack", action="store_true", help="also time Q8_0/Q5_0 tensors in the Q8_0 R16 layout")
    ap.add_argument("--prefetch", default="0", help="comma-separated prefetch distances (bytes) for the R16 kernel")
    args = ap.parse_args()
    reader = GGUFReader(ensure_model(args.model))
    # one tensor per weight type: the largest of each, so the data cannot sit in cache
    by_type = {}
    for t in reader.tensors.values():
        if len(t.dims) == 2 and (t.ggml_type not in by_type or t.nbytes > by_type[t.ggml_type].nbytes):
            by_type[t.ggml_type] = t
    rng = np.random.default_rng(0)
    print(f"{'tensor':28} {'type':11} {'MB':>7} {'path':10} {'GB/s median':>11} {'min-max':>13} {'src GB/s':>8}")
    for wt, t in sorted(by_type.items()):
        cols, rows = t.dims
        x = rng.standard_normal((args.n_vec, cols)).astype(np.float32)
        raw = reader.tensor_data(t.name)
        layouts = [(wt.name, t.nbytes, lambda n, path: matmul_bench(raw, wt, rows, cols, x, n, isa=path))]
        if args.repack and wt in native_repack.SOURCE_TYPES:
            packed = native_repack.repack(raw, wt, rows, cols)
            for distance in map(int, args.prefetch.split(",")):
                layouts.append((f"R16 pf{distance}" if distance else f"{wt.name}>R16", packed.nbytes,
                                lambda n, path, d=distance: _r16_bench(packed, rows, cols, x, n, path, d)))
        for label, nbytes, bench in layouts:
            n_iter = max(1, int(args.min_mb * 1e6 / nbytes))
            for path in args.paths.split(","):
                bench(1, path)  # warm-up
                seconds = [bench(n_iter, path) for _ in range(args.reps)]
                gbps = [nbytes * n_iter / s / 1e9 for s in seconds]
                src = t.nbytes * n_iter / statistics.median(seconds) / 1e9
                print(f"{t.name:28} {label:11} {nbytes / 1e6:7.1f} {path:10} {statistics.median(gbps):11.1f} "
                      f"{min(gbps):6.1f}-{max(gbps):<6.1f} {src:8.1f}")


def _r16_bench(packed, rows, cols, x, n_iter, path, prefetch):
    before = _core.r16_prefetch(prefetch)
    try:
        return native_repack.matmul_bench(packed, rows, cols, x, n_iter, isa=path)
    finally:
        _core.r16_prefetch(before)


if __name__ == "__main__":
    main()
