"""Static throughput of the native kernels' inner loops on CPUs this machine is not: llvm-mca on the package's own
compiled code.

A kernel choice measured on one CPU (docs/cpu-decisions-*.md) says nothing about a CPU whose execution pipes are
shared differently (docs/perf-log.md, entry 20: on Zen 4 the FMAs and the integer multiplies share one pipe pair).
Until the other CPU can be measured, LLVM's scheduling models can predict it: this compiles a kernel source with
the package's flags, finds its innermost single-block loops (a label followed by straight-line code ending in a
branch back to it), and runs llvm-mca on each for every -mcpu asked for. It prints cycles per iteration and
multiply-accumulates per cycle, so the same loop can be compared across CPUs and two loops on one CPU.

A prediction, not a measurement: calibrate it against a CPU where both were measured (perf-log 27 does so on the
Intel Xeon of entries 24-26) before reading it for another.

    python benchmarks/mca_loops.py src/onewell/_native/kernels/gemm_q8_0_f32_avx2.c \
        --function vec_dot_q8_0_q8_0_gemm_avx2 --function vec_dot_q8_0_q8_0_tile_avx2 \
        --cpus sapphirerapids,znver3,znver4
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "src" / "onewell" / "_native"
# the package's own flags (setup.py); the kernels choose their ISA with target attributes
CFLAGS = ["-O3", "-std=c11", "-fno-math-errno", f"-I{NATIVE}", f"-I{NATIVE / 'kernels'}"]

LABEL = re.compile(r"^(\.L\w+):")
FUNCTION = re.compile(r"^([A-Za-z_]\w*):")
BRANCH = re.compile(r"^\s+j\w+\s+(\.L\w+)\s*$")


@dataclass
class Loop:
    function: str
    label: str
    body: list[str]

    def count(self, *prefixes: str) -> int:
        return sum(1 for line in self.body if mnemonic(line).startswith(prefixes))

    def macs(self) -> int:
        """Multiply-accumulates per iteration: an int8 block dot (32 products) ends in one FMA per (row, vector);
        a float loop does 8 per FMA"""
        fmas = self.count("vfmadd")
        int8 = self.count("vpmaddubsw", "vpdpbusd")
        return 32 * fmas if int8 else 8 * fmas


def mnemonic(line: str) -> str:
    """the instruction's name; gcc writes AVX-VNNI's VEX forms as `{vex} vpdpbusd ...`"""
    words = line.split()
    return words[1] if words[0] == "{vex}" and len(words) > 1 else words[0]


def assemble(source: Path, compiler: str) -> list[str]:
    out = subprocess.run([compiler, *CFLAGS, "-S", "-o", "-", str(source)], check=True, capture_output=True,
                         text=True).stdout
    return out.splitlines()


def innermost_loops(lines: list[str]) -> list[Loop]:
    loops, function, label, body = [], "?", None, []
    for line in lines:
        if m := FUNCTION.match(line):
            function, label, body = m.group(1), None, []
        elif m := LABEL.match(line):
            label, body = m.group(1), []
        elif label and line.startswith("\t") and not line.lstrip().startswith("."):
            body.append(line.strip())
            b = BRANCH.match(line)
            if b and b.group(1) == label:
                loops.append(Loop(function, label, body))
                label, body = None, []
            elif line.split()[0].startswith(("j", "ret")):
                label, body = None, []      # leaves the block elsewhere: not a single-block loop
    return loops


def mca_cycles(loop: Loop, cpu: str, mca: str, iterations: int = 400) -> tuple[float, float]:
    """(cycles per iteration in steady state, the resource bound llvm-mca calls Block RThroughput)"""
    out = subprocess.run([mca, "-mtriple=x86_64-unknown-linux-gnu", f"-mcpu={cpu}", f"-iterations={iterations}"],
                         input="\n".join(loop.body) + "\n", check=True, capture_output=True, text=True).stdout
    total = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1))
    bound = float(re.search(r"Block RThroughput:\s+([\d.]+)", out).group(1))
    return total / iterations, bound


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--function", action="append", default=[], help="only loops in these functions (repeatable)")
    ap.add_argument("--cpus", default="sapphirerapids,alderlake,znver3,znver4,znver5")
    ap.add_argument("--compiler", default="gcc")
    ap.add_argument("--mca", default=shutil.which("llvm-mca-19") or shutil.which("llvm-mca") or "llvm-mca")
    ap.add_argument("--min-fma", type=int, default=4, help="skip loops with fewer FMAs (setup and tails)")
    args = ap.parse_args(argv)
    cpus = args.cpus.split(",")
    print(f"| function | loop | insns | FMAs | MAC/iter | " + " | ".join(f"{c} cyc/iter (bound), MAC/cyc" for c in cpus) + " |")
    print("|---|---|---|---|---|" + "---|" * len(cpus))
    for source in args.sources:
        for loop in innermost_loops(assemble(source, args.compiler)):
            if args.function and loop.function not in args.function:
                continue
            if loop.count("vfmadd") < args.min_fma:
                continue
            cells = []
            for cpu in cpus:
                cyc, bound = mca_cycles(loop, cpu, args.mca)
                cells.append(f"{cyc:.2f} ({bound:.2f}), **{loop.macs() / cyc:.1f}**")
            print(f"| {loop.function} | {loop.label} | {len(loop.body)} | {loop.count('vfmadd')} | {loop.macs()} | "
                  + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
