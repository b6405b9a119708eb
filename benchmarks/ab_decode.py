"""A/B decode speed of engine settings, interleaved in one process (A B A B ...), as the perf log wants.

Each variant is a dict of NativeBackend keyword arguments (e.g. `repack`, `chunk_rows`) plus the process-wide
knobs of the streaming decode kernels: `r16_prefetch` (bytes of software prefetch for every stream; default: this
CPU's, _core.cpu_identity(), which may differ for F16), `r16_row_stream` (1: single-vector matmuls stream rows one at a time, the default; 0:
4-row tiles) and `wide_tiles` (the AVX-512 Q4_0/Q5_0/F16 prefill tiles: 1, two rows per zmm; 0, one row per ymm;
default: this CPU's), `float_gemm` (prefill of Q8_0, F16, BF16 on the AVX2 paths and F16 on AVX-512: 1, a float
GEMM from 32 vectors; 0, the exact tiles; default: this CPU's), `gemm_overlap` (that GEMM builds its next weight panel between its
micro-kernel calls: 1, or after them: 0; default: this CPU's), `rows_gemm` (the Q8_0 GEMM of the AVX2 paths: 1, int8 with 8 rows
in the lanes; 0, floats; 3, Q8_0 and the AVX2 path's IQ4_NL in floats, the other types int8; default: this CPU's for
each path) and `r16_act_bytes` (activation bytes per vector block of the AVX-512 R16
prefill tiles; 0: one block; default 24 KiB). Prints tok/s per
variant (median of the repetitions) and each variant's median of per-repetition ratios to the first (the two
ran back to back, so a slow moment of the machine hits both).

    python benchmarks/ab_decode.py MODEL --threads 1 --variants '{"repack": False}' '{"repack": True}'
"""
import argparse
import ast
import statistics
import time

import numpy as np

from onewell._native import _core
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.models.registry import load_spec
from onewell.runtime.native import NativeBackend

KNOBS = ("r16_prefetch", "r16_row_stream", "wide_tiles", "float_gemm", "gemm_overlap", "rows_gemm", "r16_act_bytes")


def tg_speed(backend: NativeBackend, n_gen: int) -> float:
    backend.reset()
    tok = backend.forward_argmax([1, 2, 3, 4])
    t0 = time.perf_counter()
    for _ in range(n_gen):
        tok = backend.forward_argmax([tok])
    return n_gen / (time.perf_counter() - t0)


def pp_speed(backend: NativeBackend, prompt: list[int]) -> float:
    backend.reset()
    t0 = time.perf_counter()
    backend.forward(prompt)
    return len(prompt) / (time.perf_counter() - t0)


def measure_variants(model: str, variants: list[dict], threads: int = 1, reps: int = 7, n_gen: int = 32,
                     n_prompt: int = 0) -> tuple[float, list[list[float]]]:
    """(weight MB read per token, tok/s per variant per repetition): the variants interleaved A B A B ..."""
    spec = load_spec(GGUFReader(ensure_model(model)))
    backends = []
    for v in variants:
        kwargs = {k: val for k, val in v.items() if k not in KNOBS}
        backends.append(NativeBackend(spec, n_ctx=max(256, n_prompt + 1), threads=threads, **kwargs))
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, spec.config.n_vocab, n_prompt)]
    measure = (lambda b: pp_speed(b, prompt)) if n_prompt else (lambda b: tg_speed(b, n_gen))
    speeds = [[] for _ in variants]
    try:
        for _ in range(reps):
            for i, (v, b) in enumerate(zip(variants, backends)):
                set_knobs(v)
                tg_speed(b, 4)  # warm this backend's caches and pool after the other ran
                speeds[i].append(measure(b))
    finally:
        set_knobs({})
    return spec.bytes_per_token() / 1e6, speeds


def set_knobs(v: dict) -> None:
    """The process-wide knobs as variant v names them, this CPU's defaults for the rest"""
    ident = _core.cpu_identity()
    _core.r16_prefetch(v.get("r16_prefetch", -2))   # -2: this CPU's defaults
    _core.r16_row_stream(v.get("r16_row_stream", 1))
    _core.wide_tiles(v.get("wide_tiles", ident["default_wide_tiles"]))
    _core.float_gemm(v.get("float_gemm", ident["default_float_gemm"]))
    _core.gemm_overlap(v.get("gemm_overlap", ident["default_gemm_overlap"]))
    _core.rows_gemm(v.get("rows_gemm", -2))   # -2: each path's default
    _core.r16_act_bytes(v.get("r16_act_bytes", -2))


def ratios_to_first(speeds: list[list[float]]) -> list[float]:
    """Each variant's median of per-repetition ratios to the first variant"""
    return [statistics.median(x / y for x, y in zip(s, speeds[0])) for s in speeds]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("-n", "--n-gen", type=int, default=32)
    ap.add_argument("-p", "--n-prompt", type=int, default=0,
                    help="measure prefill of a prompt this long instead of decode (pp instead of tg)")
    ap.add_argument("--variants", nargs="+", required=True, help="python dict literals")
    args = ap.parse_args()
    variants = [ast.literal_eval(v) for v in args.variants]
    mb, speeds = measure_variants(args.model, variants, args.threads, args.reps, args.n_gen, args.n_prompt)
    test = f"pp{args.n_prompt}" if args.n_prompt else f"tg{args.n_gen}"
    print(f"{args.model}, {args.threads} thread(s), {test}, {args.reps} interleaved reps, {mb:.1f} MB/token (file bytes)")
    for v, s, ratio in zip(variants, speeds, ratios_to_first(speeds)):
        med = statistics.median(s)
        print(f"  {str(v):50} {med:7.2f} tok/s  ({min(s):.1f}-{max(s):.1f})  {med * mb / 1e3:5.1f} GB/s  "
              f"median ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
