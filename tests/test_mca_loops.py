"""benchmarks/mca_loops.py finds the innermost loops it hands to llvm-mca: single-block loops only, with the right
instruction counts, from the package's own compiled kernels."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mca_loops", ROOT / "benchmarks" / "mca_loops.py")
mca_loops = importlib.util.module_from_spec(spec)
sys.modules["mca_loops"] = mca_loops   # its dataclass looks itself up there
spec.loader.exec_module(mca_loops)

ASM = """\
f:
\tmovl\t$0, %eax
.L3:
\tvfmadd231ps\t(%rdi), %ymm1, %ymm0
\t{vex} vpdpbusd\t%ymm2, %ymm3, %ymm4
\taddq\t$32, %rdi
\tcmpq\t%rdi, %rsi
\tjne\t.L3
.L4:
\tvmovaps\t%ymm0, %ymm5
\tjmp\t.L9
\tjne\t.L4
g:
.L7:
\taddq\t$1, %rax
.L8:
\tvfmadd231ps\t%ymm1, %ymm2, %ymm3
\tjne\t.L7
\tret
"""


def test_single_block_loops_only():
    loops = mca_loops.innermost_loops(ASM.splitlines())
    # .L3 closes on itself; .L4 leaves through jmp first; .L7's body has another label inside, so it is not one block
    assert [(l.function, l.label) for l in loops] == [("f", ".L3")]
    loop = loops[0]
    assert len(loop.body) == 5 and loop.body[-1].startswith("jne")
    assert loop.count("vfmadd") == 1 and loop.count("vpdpbusd") == 1   # `{vex}` prefix read past
    assert loop.macs() == 32   # an int8 block loop: 32 products per FMA


def test_float_loop_counts_eight_per_fma():
    loop = mca_loops.Loop("f", ".L1", ["vfmadd231ps\t%ymm1, %ymm2, %ymm3"] * 12 + ["jne\t.L1"])
    assert loop.macs() == 96


def test_finds_the_gemm_micro_kernel_in_the_real_source():
    # gcc: the package's own build needs it, so every machine that installs onewell has it
    source = ROOT / "src" / "onewell" / "_native" / "kernels" / "gemm_q8_0_f32_avx2.c"
    loops = [l for l in mca_loops.innermost_loops(mca_loops.assemble(source, "gcc"))
             if l.function == "vec_dot_q8_0_q8_0_gemm_avx2"]
    # the 6 x 16 micro-kernel: per column 12 FMAs (6 vectors x 2 panel halves), no integer multiplies
    assert any(l.count("vfmadd") == 12 and l.count("vpmaddubsw") == 0 and l.macs() == 96 for l in loops)
