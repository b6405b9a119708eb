"""A/B two source trees (e.g. main and a branch, each with its C core built in place), interleaved A B A B ...

Each measurement runs in a fresh process with PYTHONPATH=<tree>/src, so the two builds never share a process:
  - decode: tok/s of NativeBackend.forward_argmax on a model (tg of --n-gen tokens after a 4-token prompt);
  - prefill: tok/s of NativeBackend.forward on a --n-prompt-token prompt (pp, best of 3 in the process);
  - dispatch: seconds per _core.matmul_bench call on a tiny matrix (4 rows x 256 cols Q4_K), where the per-call
    cost of kernel dispatch is largest relative to the work.
Prints each tree's median and the median of the per-repetition ratios B/A.

    python benchmarks/ab_trees.py /tmp/main_tree /work/wt/me --model qwen2.5-coder-0.5b-instruct:q4_k_m --reps 7
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

DECODE = """
import json, sys, time
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.models.registry import load_spec
from onewell.runtime.native import NativeBackend
model, threads, n_gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = NativeBackend(load_spec(GGUFReader(ensure_model(model))), n_ctx=256, threads=threads)
tok = b.forward_argmax([1, 2, 3, 4])
for _ in range(4): tok = b.forward_argmax([tok])
t0 = time.perf_counter()
for _ in range(n_gen): tok = b.forward_argmax([tok])
print(json.dumps(n_gen / (time.perf_counter() - t0)))
"""

PREFILL = """
import json, sys, time
import numpy as np
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.models.registry import load_spec
from onewell.runtime.native import NativeBackend
model, threads, n_prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spec = load_spec(GGUFReader(ensure_model(model)))
b = NativeBackend(spec, n_ctx=max(256, n_prompt), threads=threads)
prompt = np.random.default_rng(0).integers(0, spec.config.n_vocab, n_prompt).tolist()
best = 0.0
for _ in range(3):
    b.reset()
    t0 = time.perf_counter()
    b.forward(prompt)
    best = max(best, n_prompt / (time.perf_counter() - t0))
print(json.dumps(best))
"""

DISPATCH = """
import json
import numpy as np
from onewell._native import _core
from onewell.gguf.constants import GGMLType
from onewell.runtime.native_kernels import quantize_act
rng = np.random.default_rng(0)
rows, cols, n_iter = 4, 256, 200000
raw = rng.integers(0, 256, rows * 144, dtype=np.uint8)
raw.reshape(rows, 144)[:, :4] = 0x00   # d = dmin = 0: finite values
xq = quantize_act(rng.standard_normal(cols).astype(np.float32), GGMLType.Q4_K)
y = np.empty(rows, np.float32)
best = min(_core.matmul_bench(int(GGMLType.Q4_K), raw, 144, cols, xq, xq.size, 1, y, rows, 0, rows,
                              _core.kernel_default_path(), n_iter) for _ in range(3))
print(json.dumps(best / n_iter))
"""


def run(tree: str, extra_env: dict[str, str], code: str, *argv: str) -> float:
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"), **extra_env)
    out = subprocess.run([sys.executable, "-c", code, *argv], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree_a")
    ap.add_argument("tree_b")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct:q4_k_m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("-n", "--n-gen", type=int, default=32)
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", choices=("decode", "prefill", "dispatch"), action="append",
                    help="run only these measures (repeatable; default: all)")
    ap.add_argument("--env-a", action="append", default=[], metavar="KEY=VALUE",
                    help="environment of tree A's runs only (repeatable), e.g. ONEWELL_ISA=avx2 where the trees "
                         "name the same path differently")
    ap.add_argument("--env-b", action="append", default=[], metavar="KEY=VALUE", help="the same for tree B")
    args = ap.parse_args()
    env_a, env_b = (dict(kv.split("=", 1) for kv in pairs) for pairs in (args.env_a, args.env_b))
    benches = {"decode tok/s": (DECODE, args.model, str(args.threads), str(args.n_gen)),
               "prefill tok/s": (PREFILL, args.model, str(args.threads), str(args.n_prompt)),
               "dispatch s/call": (DISPATCH,)}
    if args.only:
        benches = {k: v for k, v in benches.items() if k.split()[0] in args.only}
    for name, (code, *argv) in benches.items():
        a, b = [], []
        for _ in range(args.reps):
            a.append(run(args.tree_a, env_a, code, *argv))
            b.append(run(args.tree_b, env_b, code, *argv))
        ratio = statistics.median(y / x for x, y in zip(a, b))
        print(f"{name:16} A {statistics.median(a):.4g}  B {statistics.median(b):.4g}  "
              f"median B/A {ratio:.3f}  ({args.reps} interleaved reps)")


if __name__ == "__main__":
    main()
