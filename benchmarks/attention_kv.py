"""Attention of one decoded token per KV cache type at depth, interleaved (f32 f16 q8_0 f32 f16 q8_0 ...).

One call of the native attention op (onewell/_native/ops.c) over n_ctx cached positions with a model's head
layout, per kv type and ops ISA; prints microseconds per call (median of the repetitions), the bytes of K and V
it reads, and each type's time relative to f32. The executor runs this once per layer and token, split over its
threads; this measures one thread, the kernel alone.

    python benchmarks/attention_kv.py                       # Qwen2.5-0.5B heads (14 query, 2 kv, 64), 4096
    python benchmarks/attention_kv.py --heads 9,3,64 --ctx 512,4096 --isa generic,avx2
"""
import argparse
import statistics
import time

import numpy as np

from onewell.runtime import native_ops as ops
from onewell.runtime.kv_cache import KV_TYPES, kv_bytes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heads", default="14,2,64", help="n_head,n_head_kv,head_dim (default Qwen2.5-0.5B's)")
    p.add_argument("--ctx", default="4096", help="cached positions, e.g. 512,4096")
    p.add_argument("--isa", default=None, help="ops ISA paths (default: the best this CPU has)")
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--calls", type=int, default=20, help="calls per repetition")
    args = p.parse_args()
    n_head, n_kv, hd = map(int, args.heads.split(","))
    isas = args.isa.split(",") if args.isa else [ops.available_isas()[-1]]
    rng = np.random.default_rng(0)
    q = rng.standard_normal((n_head, hd), dtype=np.float32)
    before = ops.ops_isa()
    try:
        for n_ctx in map(int, args.ctx.split(",")):
            k = rng.standard_normal((n_ctx, n_kv, hd), dtype=np.float32)
            v = rng.standard_normal((n_ctx, n_kv, hd), dtype=np.float32)
            stored = {t: (ops.kv_store(k, t), ops.kv_store(v, t)) for t in KV_TYPES}
            for isa in isas:
                ops.set_ops_isa(isa)
                times = {t: [] for t in KV_TYPES}
                for _ in range(args.reps):
                    for t, (ks, vs) in stored.items():
                        t0 = time.perf_counter_ns()
                        for _ in range(args.calls):
                            ops.attention(q, ks, vs)
                        times[t].append((time.perf_counter_ns() - t0) / args.calls / 1e3)
                base = statistics.median(times["f32"])
                for t in KV_TYPES:
                    us = statistics.median(times[t])
                    mb = 2 * kv_bytes(t, n_ctx * n_kv * hd) / 1e6
                    print(f"n_ctx {n_ctx:6d}  {isa:8s} {t:5s} {us:9.1f} us/call  K+V {mb:6.2f} MB  "
                          f"x{base / us:.2f} vs f32")
    finally:
        ops.set_ops_isa(before)


if __name__ == "__main__":
    main()
