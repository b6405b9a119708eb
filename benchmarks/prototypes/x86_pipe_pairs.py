"""Which AVX2 instructions of the prefill tiles compete for the same execution pipes on this CPU.

For each pair of instructions (A, B), times 12 independent instructions alternating A and B and prints the time
in units of the fastest single type (vpaddd, 4 pipes on Zen 3/4). Two types on the same two pipes take as long
together as each alone; types on different pipes take about half. On Zen 4 this showed vpsignb, vpabsb,
vpmaddubsw, vpmaddwd, vpmulld, vfmadd and vmulps on one pair of pipes and vcvtdq2ps and vaddps/vsubps on the
other (docs/perf-log.md, entry 20). Needs gcc; nothing else may run meanwhile.
    python benchmarks/prototypes/x86_pipe_pairs.py
"""
import os
import subprocess
import tempfile

INSTRUCTIONS = {
    "sign": "vpsignb %%ymm12,%%ymm13,%%ymm{d}",
    "abs": "vpabsb %%ymm12,%%ymm{d}",
    "ubs": "vpmaddubsw %%ymm12,%%ymm13,%%ymm{d}",
    "wd": "vpmaddwd %%ymm12,%%ymm13,%%ymm{d}",
    "fma": "vfmadd231ps %%ymm12,%%ymm13,%%ymm{d}",
    "mulps": "vmulps %%ymm12,%%ymm13,%%ymm{d}",
    "cvt": "vcvtdq2ps %%ymm12,%%ymm{d}",
    "addps": "vaddps %%ymm12,%%ymm13,%%ymm{d}",
    "add": "vpaddd %%ymm12,%%ymm13,%%ymm{d}",
    "xor": "vpxor %%ymm12,%%ymm13,%%ymm{d}",
    "shuf": "vpshufb %%ymm12,%%ymm13,%%ymm{d}",
}
FOCUS = ("sign", "ubs", "wd", "fma", "cvt")
CLOBBER = ",".join(f'"xmm{i}"' for i in range(12))


def loop(a: str, b: str) -> str:
    body = "\\n ".join((INSTRUCTIONS[a] if k % 2 == 0 else INSTRUCTIONS[b]).format(d=k) for k in range(12))
    return (f'{{ double t = now(); for (long i = 0; i < N; i++) __asm__ volatile("{body}" ::: {CLOBBER});\n'
            f'  printf("%-6s %-6s %.2f\\n", "{a}", "{b}", (now() - t) / base); }}')


def main() -> None:
    pairs = [(a, a) for a in INSTRUCTIONS]
    pairs += [(a, b) for i, a in enumerate(INSTRUCTIONS) for b in list(INSTRUCTIONS)[i + 1:] if a in FOCUS]
    src = "\n".join([
        "#include <stdio.h>", "#include <time.h>", "#define N 50000000L",
        "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
        " return t.tv_sec + 1e-9 * t.tv_nsec; }",
        "int main(void) { double base = 1;",
        loop("add", "add").replace('printf("%-6s %-6s %.2f\\n", "add", "add", (now() - t) / base);',
                                   "base = now() - t;"),
        'printf("time of 12 instructions, in units of 12 vpaddd\\n");',
        *(loop(a, b) for a, b in pairs), "return 0; }"])
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = os.path.join(tmp, "pairs.c"), os.path.join(tmp, "pairs")
        with open(c, "w") as f:
            f.write(src)
        subprocess.run(["gcc", "-O2", "-mavx2", "-mfma", c, "-o", exe], check=True)
        subprocess.run([exe], check=True)


if __name__ == "__main__":
    main()
