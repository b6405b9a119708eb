"""Measure, on this machine, every kernel choice onewell makes per CPU, as interleaved A/Bs in one process.

Some choices are tables keyed by the CPU (cpu_features.c: ow_default_prefetch, ow_default_f16_prefetch,
ow_default_wide_tiles, ow_default_float_gemm, ow_default_gemm_overlap, ow_default_rows_gemm, ow_default_r8) or
budgets measured on one CPU (OW_R16_ACT_BYTES). Each was decided
on the machines docs/perf-log.md names; on a CPU not among them this script gives the numbers to decide again:
each decision's variants run A B A B ... (ab_decode.measure_variants) on the kernel paths it concerns, and the
table shows tok/s and the median of per-repetition ratios to the first variant (this CPU's current choice).

    python benchmarks/cpu_decisions.py                       # all decisions this CPU has paths for, 1 and 2 threads
    python benchmarks/cpu_decisions.py --only float_gemm --threads 2 --reps 9 --out gemm.md

Run it on a quiet machine (nothing compiling or testing: two cores); the full set takes ~15-25 minutes.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ab_decode import measure_variants, ratios_to_first

from onewell._native import _core
from onewell.bench.machine import cpu_model
from onewell.runtime import native_kernels as nk

QWEN_Q8_0 = "qwen2.5-coder-0.5b-instruct:q8_0"
QWEN_Q4_K_M = "qwen2.5-coder-0.5b-instruct"   # Q5_0 ffn_gate/up, Q8_0 attn_v, Q6_K down/output
SMOLLM2_Q4_1 = "smollm2-135m-instruct"
QWEN_F16 = "qwen2.5-coder-0.5b-instruct:f16"


@dataclass(frozen=True)
class Decision:
    name: str
    what: str                                  # the choice and where the code makes it
    paths: tuple[str, ...]                     # kernel paths it concerns (those this CPU has are measured)
    cases: tuple[tuple[str, str], ...]         # (model, "pp128" | "tg32")
    variants: tuple[dict, ...]                 # knob settings; the first is this CPU's current choice

    def variants_for(self, path: str) -> list[dict]:
        return [{"isa": path, **_with_r8(path, v)} for v in self.variants]


def _with_r8(path: str, v: dict) -> dict:
    """A variant's "r8" (0 / 1) as the repack set a backend on `path` takes: that path's table row without / with
    the R8 layouts (native_kernels.R8_LAYOUTS)"""
    if "r8" not in v:
        return v
    rest = {k: val for k, val in v.items() if k != "r8"}
    base = nk.DEFAULT_REPACK.get(path, frozenset())
    return {**rest, "repack": sorted(base | nk.R8_LAYOUTS if v["r8"] else base)}


def decisions() -> list[Decision]:
    ident = _core.cpu_identity()
    prefetch, f16_prefetch = ident["default_prefetch"], ident["default_f16_prefetch"]
    r8 = int(ident["default_r8"])
    gemm, wide, overlap = ident["default_float_gemm"], ident["default_wide_tiles"], ident["default_gemm_overlap"]
    rows, rows_avx2, rows_avx512 = (ident["default_rows_gemm"], ident["default_rows_gemm_avx2"],
                                    ident["default_rows_gemm_avx512"])
    others = lambda current, options: tuple(o for o in options if o != current)   # noqa: E731
    return [
        Decision("r8_layouts", "the AVX2 path copies Q8_0, Q4_1, Q5_0, Q4_0, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS "
                 "matrices into their R8 layouts at load (1) or streams the file layouts (0) (ow_default_r8; "
                 "perf-log 42-45)", ("avx2",),
                 ((QWEN_Q8_0, "tg32"), (QWEN_Q4_K_M, "tg32"), (SMOLLM2_Q4_1, "tg32"), (QWEN_Q8_0, "pp128"),
                  (QWEN_Q4_K_M, "pp128"), (SMOLLM2_Q4_1, "pp128")),
                 ({"r8": r8}, {"r8": 1 - r8})),
        Decision("float_gemm", "Q8_0 prefill as a GEMM from 32 vectors, else the exact int8 tiles (ow_default_float_gemm; "
                 "the GEMM in int8 with rows in the lanes where rows_gemm, else in floats; perf-log 25, 29)",
                 ("avx2", "avx2-vnni"), ((QWEN_Q8_0, "pp128"),),
                 ({"float_gemm": gemm}, {"float_gemm": 1 - gemm})),
        Decision("float_gemm_f16", "F16 prefill as a float GEMM from 32 vectors (the same knob; 512-bit panels on the "
                 "AVX-512 path where wide_tiles; perf-log 28)", ("avx2", "avx2-vnni", "avx512"),
                 ((QWEN_F16, "pp128"),), ({"float_gemm": gemm}, {"float_gemm": 1 - gemm})),
        Decision("gemm_overlap", "the float GEMM builds its next weight panel between its micro-kernel calls "
                 "(ow_default_gemm_overlap: L1 data >= 48 KiB; perf-log 28)", ("avx2", "avx2-vnni"),
                 ((QWEN_Q8_0, "pp128"),),
                 ({"float_gemm": 1, "rows_gemm": 0, "gemm_overlap": overlap},
                  {"float_gemm": 1, "rows_gemm": 0, "gemm_overlap": 1 - overlap})),
        Decision("rows_gemm", "the AVX2 path's Q8_0 / Q4_0 / Q5_0 / K-quant GEMMs in int8 with 8 rows in the vector lanes, "
                 "Q8_0's signs by vpsignb (1) or xor + sub (2), or Q8_0 in floats (3), else Q8_0 in floats and the "
                 "others through their exact tiles (0) (ow_default_rows_gemm; perf-log 29, 30, 41)", ("avx2",),
                 ((QWEN_Q8_0, "pp128"), (QWEN_Q4_K_M, "pp128")),
                 tuple({"float_gemm": 1, "rows_gemm": m} for m in (rows_avx2,) + others(rows_avx2, (0, 1, 2, 3)))),
        Decision("rows_gemm_vnni", "the AVX-VNNI path's Q8_0 / Q4_0 / Q5_0 / K-quant GEMMs in int8 with 8 rows in the vector "
                 "lanes (1), else Q8_0 in floats and the others through their exact tiles (0) (ow_default_rows_gemm; "
                 "perf-log 29, 30)", ("avx2-vnni",), ((QWEN_Q8_0, "pp128"), (QWEN_Q4_K_M, "pp128")),
                 ({"float_gemm": 1, "rows_gemm": rows}, {"float_gemm": 1, "rows_gemm": 1 - rows})),
        Decision("rows_gemm_avx512", "the AVX-512 path's Q4_0 / Q5_0 / K-quant GEMMs in int8 with rows in the lanes (zmm, 16 "
                 "rows, where wide_tiles; else ymm, 8) (1), else their exact tiles (0) (ow_default_rows_gemm; perf-log "
                 "29, 30)",
                 ("avx512",), ((QWEN_Q4_K_M, "pp128"),),
                 ({"float_gemm": 1, "rows_gemm": rows_avx512}, {"float_gemm": 1, "rows_gemm": 1 - rows_avx512})),
        Decision("r16_act_bytes", "activation budget per vector block of the AVX-512 R16 prefill tiles "
                 "(OW_R16_ACT_BYTES; perf-log 25)", ("avx512",), ((SMOLLM2_Q4_1, "pp128"), (QWEN_Q8_0, "pp128")),
                 ({"r16_act_bytes": 24 << 10},) + others({"r16_act_bytes": 24 << 10},
                                                          [{"r16_act_bytes": b << 10} for b in (0, 16, 32, 48)])),
        Decision("wide_tiles", "AVX-512 Q4_0/Q5_0/F16 prefill tiles two rows per zmm, and the F16/BF16 float GEMM "
                 "in 512-bit panels (ow_default_wide_tiles; perf-log 24, 28)", ("avx512",),
                 ((QWEN_Q4_K_M, "pp128"), (QWEN_F16, "pp128")),
                 ({"wide_tiles": wide}, {"wide_tiles": 1 - wide})),
        Decision("decode_prefetch", "software prefetch distance of the decode streams (ow_default_prefetch; "
                 "perf-log 3, 17, 19, 41, 46)", ("avx2", "avx512"), ((QWEN_Q8_0, "tg32"), (QWEN_Q4_K_M, "tg32")),
                 ({"r16_prefetch": prefetch},) + others({"r16_prefetch": prefetch},
                                                        [{"r16_prefetch": b} for b in (0, 8192, 16384)])),
        Decision("f16_prefetch", "software prefetch distance of the F16 decode streams (ow_default_f16_prefetch; "
                 "perf-log 24)", ("avx2", "avx512"), ((QWEN_F16, "tg32"),),
                 ({"r16_prefetch": f16_prefetch},) + others({"r16_prefetch": f16_prefetch},
                                                            [{"r16_prefetch": b} for b in (0, 8192, 16384)])),
    ]


def run(decision: Decision, threads: list[int], reps: int) -> list[str]:
    lines = [f"### {decision.name}: {decision.what}", "",
             "| model | test | path | threads | " + " | ".join(_label(v) for v in decision.variants) + " |",
             "|---|---|---|---|" + "---|" * len(decision.variants)]
    for path in (p for p in decision.paths if p in nk.available_paths()):
        for model, test in decision.cases:
            for t in threads:
                n_prompt, n_gen = (int(test[2:]), 32) if test.startswith("pp") else (0, int(test[2:]))
                _, speeds = measure_variants(model, decision.variants_for(path), t, reps, n_gen, n_prompt)
                cells = [f"{statistics.median(s):.1f} tok/s" + ("" if i == 0 else f", **{r:.3f}**")
                         for i, (s, r) in enumerate(zip(speeds, ratios_to_first(speeds)))]
                lines.append(f"| {model} | {test} | {path} | {t} | " + " | ".join(cells) + " |")
                print(lines[-1], flush=True)
    return lines + [""]


def _label(v: dict) -> str:
    return ", ".join(f"{k} {val}" for k, val in v.items())


def header(reps: int) -> list[str]:
    ident = _core.cpu_identity()
    return [f"# Per-CPU kernel decisions measured on {cpu_model()} ({ident['vendor']} family {ident['family']} "
            f"model {ident['model']}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
            f"Kernel paths: {', '.join(nk.available_paths())}. This CPU's current choices: {ident}. "
            f"{reps} interleaved repetitions per row; each ratio is the median of per-repetition ratios to the "
            "first column (the current choice); above 1 means that variant was faster.", ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated decision names (default: all)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", type=Path, help="markdown file for the tables (default: bench-results/cpu-decisions-*.md)")
    args = ap.parse_args()
    chosen = decisions()
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {d.name for d in chosen}
        if unknown:
            ap.error(f"unknown decision(s) {sorted(unknown)}; known: {[d.name for d in chosen]}")
        chosen = [d for d in chosen if d.name in names]
    threads = [int(t) for t in args.threads.split(",")]
    out = args.out or Path("bench-results") / f"cpu-decisions-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.md"
    lines = header(args.reps)
    for d in chosen:
        lines += run(d, threads, args.reps)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"[cpu_decisions] tables in {out}")


if __name__ == "__main__":
    main()
