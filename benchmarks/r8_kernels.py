"""Single-thread decode GB/s of the R8 layouts against their file layouts, on random matrices of the models' shapes.

For each type (Q8_0, Q4_1, Q5_0, Q4_0, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS) and shape, the file layout's kernel and the R8 layout's
(kernels/q8_0_r8.h, q4_r8.h, qk_r8.h) run one vector against the same rows, interleaved (file, R8, file, ...), `--reps` times; GB/s = the
file matrix's bytes per call (Q4_K R8 reads 148 for the file's 144, Q5_K R8 180 for 176, IQ4_XS R8 138 for 136: the cost of that shows), median over the reps, and the median of the pair ratios.
Shapes below L2 measure the kernel's work, the large ones (> 20 MB) the stream from memory. Usage:
    python benchmarks/r8_kernels.py [--isa avx2] [--reps 5] [--types q4_1,q5_0,q8_0,q4_0,iq4_nl,q4_k,q5_k,q6_k,iq4_xs]
                                    [--shapes 4096x18944,...]
"""
import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_repack import random_weight  # noqa: E402  (the tests' random blocks: every quant, modest scales)
from test_repack_q4_1 import random_q4_1  # noqa: E402
from test_repack_qk_r8 import random_k  # noqa: E402

from onewell.gguf.constants import GGMLType  # noqa: E402
from onewell.quant.repack_q4_r8 import IQ4_NL_R8, Q4_0_R8, Q4_1_R8, Q5_0_R8  # noqa: E402
from onewell.quant.repack_qk_r8 import IQ4_XS_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8  # noqa: E402
from onewell.quant.repack_r8 import Q8_0_R8  # noqa: E402
from onewell.runtime import native_kernels, native_repack  # noqa: E402

LAYOUTS = {"q8_0": (GGMLType.Q8_0, Q8_0_R8), "q4_1": (GGMLType.Q4_1, Q4_1_R8), "q5_0": (GGMLType.Q5_0, Q5_0_R8),
           "q4_0": (GGMLType.Q4_0, Q4_0_R8), "iq4_nl": (GGMLType.IQ4_NL, IQ4_NL_R8), "q4_k": (GGMLType.Q4_K, Q4_K_R8),
           "q5_k": (GGMLType.Q5_K, Q5_K_R8), "q6_k": (GGMLType.Q6_K, Q6_K_R8), "iq4_xs": (GGMLType.IQ4_XS, IQ4_XS_R8)}
# SmolLM2's gate/up and down, Qwen2.5-0.5B's gate/up and down, then the same column counts from memory
SHAPES = [(1536, 576), (576, 1536), (4864, 896), (896, 4864), (65536, 576), (40000, 896), (8192, 4864)]
SUPER_BLOCK_TYPES = {"q4_k", "q5_k", "q6_k", "iq4_xs"}
# K-quants and IQ4_XS (widths multiples of 256): a Llama-3.2-1B-shaped model's gate/up and down, Qwen's down, then from memory
K_SHAPES = [(4096, 1024), (1024, 4096), (896, 4864), (40000, 1024), (8192, 4096)]
RANDOM = {GGMLType.Q4_1: random_q4_1,
          **{t: (lambda rng, r, c, t=t: random_k(rng, t, r, c))
             for t in (GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_XS)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isa", default="avx2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--types", default="q4_1,q5_0,q8_0,q4_0,iq4_nl,q4_k,q5_k,q6_k,iq4_xs")
    ap.add_argument("--shapes", help="ROWSxCOLS,... instead of the models' shapes (e.g. 4096x18944: Qwen2.5-7B's "
                    "ffn_down, past the 16,384 columns one interleaved vector holds on the stack)")
    args = ap.parse_args()
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",")] if args.shapes else None
    rng = np.random.default_rng(0)
    print(f"{'type':5} {'shape':>12} {'MB':>6} {'file GB/s':>10} {'R8 GB/s':>8} {'R8 / file':>10}  (isa {args.isa})")
    for name in args.types.split(","):
        wt, layout = LAYOUTS[name]
        for rows, cols in shapes or (K_SHAPES if name in SUPER_BLOCK_TYPES else SHAPES):
            raw = RANDOM[wt](rng, rows, cols) if wt in RANDOM else random_weight(rng, wt, rows, cols)
            packed = native_repack.repack(raw, wt, rows, cols, layout=layout)
            x = rng.standard_normal(cols).astype(np.float32)
            n = max(3, int(3e8 / raw.size))   # ~300 MB streamed per timing
            file_s, r8_s = [], []
            for _ in range(args.reps):
                file_s.append(native_kernels.matmul_bench(raw, wt, rows, cols, x, n, isa=args.isa) / n)
                r8_s.append(native_repack.matmul_bench(packed, rows, cols, x, n, isa=args.isa, layout=layout) / n)
            ratio = statistics.median(f / r for f, r in zip(file_s, r8_s))
            gb = raw.size / 1e9
            print(f"{name:5} {rows:>6}x{cols:<5} {raw.size / 1e6:6.1f} {gb / statistics.median(file_s):10.1f} "
                  f"{gb / statistics.median(r8_s):8.1f} {ratio:9.2f}x", flush=True)


if __name__ == "__main__":
    main()
