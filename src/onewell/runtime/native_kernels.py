"""Validating Python wrappers of the native quantized matvec kernels (onewell/_native/kernels).

    quantize_act(x, weight_type, isa=None)                     -> uint8 [n_vec, row bytes] (or [row bytes])
    matmul(weight_raw, weight_type, rows, cols, x, isa=None)   -> float32 [n_vec, rows] (or [rows])

`isa` names a kernel path: "generic", "avx2" (vpmaddubsw), "avx2-vnni" (AVX-VNNI), "avx512", or on aarch64
"neon" (smull/sadalp) and "neon-dotprod" (sdot); None takes the
path the engine would use (the best of this CPU, capped by ONEWELL_ISA). Weight rows may sit at any byte offset
(they come straight from the GGUF mapping). Everything is checked here before C sees it.
"""
from __future__ import annotations

import numpy as np

from onewell._native import _core as _native_core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant.act_formats import act_row_nbytes
from onewell.quant.act_formats import act_type_for as _twin_act_type_for
from onewell.runtime.native_types import weight_types

KERNEL_PATHS = ("generic", "avx2", "avx2-vnni", "avx512", "neon", "neon-dotprod")
WEIGHT_TYPES = weight_types()   # from the native type-traits table


def _core():
    return _native_core


def available_paths() -> tuple[str, ...]:
    """Kernel paths this CPU can run, from the most portable to the widest."""
    return tuple(_core().kernel_paths())


def default_path() -> str:
    return _core().kernel_default_path()


# The weight types each kernel path repacks to R16 at load unless told (docs/perf-log.md, entries 3, 10, 11 and
# 19): chosen by measurement per path, since a layout that pays on one path may not on another. Q5_0 -> Q8_0 R16
# reads 34/22 the bytes: on AVX-512 (Zen 4) the file layout, streamed, decodes 1.10-1.15x faster, and its VNNI
# prefill tile runs at 0.85-0.87 of the R16 tiles (entry 19).
DEFAULT_REPACK: dict[str, frozenset[str]] = {
    "avx512": frozenset({"q8_0", "q4_1"}),
    "avx2": frozenset(),
    "avx2-vnni": frozenset(),
    "generic": frozenset(),
    # aarch64: the R16 layouts have no NEON kernels yet (they would run the generic R16 loop); never measured
    "neon": frozenset(),
    "neon-dotprod": frozenset(),
}

# The R8 layouts (kernels/q8_0_r8.h, q4_r8.h, qk_r8.h) by name: the AVX2 path of the CPUs that measured them faster
# builds them at load (_core.cpu_identity()["default_r8"]; perf-log entries 42 to 46)
R8_LAYOUTS = frozenset({"q8_0_r8", "q4_1_r8", "q5_0_r8", "q4_0_r8", "iq4_nl_r8", "q4_k_r8", "q5_k_r8", "q6_k_r8",
                        "iq4_xs_r8"})


def default_repack(path: str | None) -> frozenset[str]:
    """The weight types (and layouts built on request) a backend on kernel path `path` (None = this CPU's default)
    repacks at load unless told: DEFAULT_REPACK's row, plus this CPU's own choice where one was measured (the AVX2
    path of AMD family 0x17 and of Zen 3 repacks Q8_0, Q4_1, Q5_0, Q4_0, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS to their
    R8 layouts: _core.cpu_identity()["default_r8"], perf-log entries 42 to 46)."""
    path = path or default_path()
    chosen = DEFAULT_REPACK.get(path, frozenset())
    if path == "avx2" and _core().cpu_identity()["default_r8"]:
        chosen = chosen | R8_LAYOUTS
    return chosen


def rounds_bf16_activations(path: str | None) -> bool:
    """Whether BF16 weights on kernel path `path` (None = this CPU's default) meet activations rounded to bf16
    (AVX512-BF16 CPUs on the avx512 path: kernels/vec_dot_bf16_avx512.c, as llama.cpp) rather than exact float32
    ones (every other path; twin: onewell.quant.floats.round_to_bf16)."""
    return resolve_path(path) == "avx512" and bool(_core().cpu_features()["avx512_bf16"])


def batch_exact(weight_type, n_vec: int, isa: str | None = None, repacked: bool | None = None) -> bool:
    """Whether a matmul of `weight_type` with n_vec vectors on kernel path `isa` (None = this CPU's default) gives
    every vector bit for bit what it gets alone. False where the path runs a GEMM for batches that large (every
    quantized type's int8 GEMM with rows in the lanes and the float GEMMs of F16 / BF16 on the x86 paths from 32
    vectors: the table's float_gemm_from) and the process-wide knob `_core.float_gemm` lets it: each result then
    equals the one-vector result to float rounding and does not depend on the other vectors of the batch.
    repacked: whether the matrix is in its load-time layout (None: as a backend on that path repacks by default,
    DEFAULT_REPACK), whose own table row then answers."""
    from onewell.runtime.native_types import type_traits

    path = resolve_path(isa)
    traits = type_traits()[int(_weight_type(weight_type))]
    if repacked is None:   # the layout a backend on that path converts it to, if any (a layout named wins)
        chosen = default_repack(path)
        named = [t for t in type_traits().values() if t.repack_from == traits.id and t.name in chosen]
        if named:
            traits = named[0]
        elif traits.repack_to is not None and traits.name in chosen:
            traits = type_traits()[traits.repack_to]
    elif repacked and traits.repack_to is not None:
        traits = type_traits()[traits.repack_to]
    start = traits.float_gemm_from[path]
    return start is None or n_vec < start or not _core().float_gemm(-1)


def resolve_path(isa: str | None) -> str:
    if isa is None:
        return default_path()
    if isa not in KERNEL_PATHS:
        raise ValueError(f"unknown kernel path {isa!r} (one of {', '.join(KERNEL_PATHS)})")
    if isa not in available_paths():
        raise UnsupportedError(f"kernel path {isa!r} needs CPU features this machine lacks "
                               f"(available: {', '.join(available_paths())})")
    return isa


def _weight_type(wt) -> GGMLType:
    try:
        wt = GGMLType(wt)
    except ValueError:
        raise UnsupportedError(f"unknown tensor type {wt!r}") from None
    if wt not in WEIGHT_TYPES:
        raise UnsupportedError(f"no matmul kernel for {wt.name} weights "
                               f"(supported: {', '.join(sorted(t.name for t in WEIGHT_TYPES))})")
    return wt


def act_type_for(weight_type) -> GGMLType:
    """The activation format weights of `weight_type` pair with (the native and numpy tables agree)."""
    wt = _weight_type(weight_type)
    native = GGMLType(_core().act_type_for(int(wt)))
    if native != _twin_act_type_for(wt):   # one table per side; a mismatch is a build/code bug
        raise RuntimeError(f"native pairs {wt.name} with {native.name}, numpy with {_twin_act_type_for(wt).name}")
    return native


def _check_activations(x, cols: int | None) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"activations must be a numpy array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise ValueError(f"activations must be float32, got {x.dtype}")
    if x.ndim not in (1, 2):
        raise ValueError(f"activations must be [cols] or [n_vec, cols], got shape {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError("activations must be C-contiguous")
    if x.size == 0:
        raise ValueError(f"empty activations of shape {x.shape}")
    if cols is not None and x.shape[-1] != cols:
        raise ValueError(f"activations have {x.shape[-1]} columns, the weight has {cols}")
    if not np.isfinite(x).all():
        raise ValueError("activations contain NaN or inf")
    return x


def quantize_act(x: np.ndarray, weight_type, isa: str | None = None) -> np.ndarray:
    """Quantize float32 activations [n_vec, n] (or [n]) to the format `weight_type` pairs with.

    Returns uint8 [n_vec, row bytes] (or [row bytes]); the same bytes on every path and as
    onewell.quant.act_formats.quantize_act.
    """
    at = act_type_for(weight_type)
    path = resolve_path(isa)
    x = _check_activations(x, None)
    n_vec, n_cols = (1, x.shape[0]) if x.ndim == 1 else x.shape
    row_bytes = act_row_nbytes(at, n_cols)
    out = np.empty((n_vec, row_bytes), dtype=np.uint8)
    _core().quantize_act(int(at), x, n_cols, n_vec, out, path)
    return out[0] if x.ndim == 1 else out


def _check_weight(weight_raw, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    if not isinstance(weight_raw, np.ndarray):
        raise TypeError(f"weight_raw must be a numpy uint8 array, got {type(weight_raw).__name__}")
    if weight_raw.dtype != np.uint8:
        raise ValueError(f"weight_raw must be uint8 bytes, got {weight_raw.dtype}")
    if not weight_raw.flags.c_contiguous:
        raise ValueError("weight_raw must be C-contiguous")
    if isinstance(rows, bool) or isinstance(cols, bool) or int(rows) != rows or int(cols) != cols:
        raise ValueError(f"rows and cols must be integers, got {rows!r}, {cols!r}")
    if rows <= 0 or cols <= 0:
        raise ValueError(f"need rows > 0 and cols > 0, got {rows} x {cols}")
    row_bytes = row_nbytes(wt, cols)   # raises if cols is not a whole number of blocks
    if weight_raw.size != rows * row_bytes:
        raise ValueError(f"{wt.name} weight of {rows} x {cols} takes {rows * row_bytes} bytes, got {weight_raw.size}")
    return weight_raw.reshape(-1)


def matmul(weight_raw: np.ndarray, weight_type, rows: int, cols: int, x: np.ndarray,
           isa: str | None = None) -> np.ndarray:
    """y = W @ x for W (rows x cols, raw bytes of `weight_type`) and float32 x [n_vec, cols] (or [cols]).

    x is quantized to the paired activation format first, exactly as the engine does. Returns float32
    [n_vec, rows] (or [rows]).
    """
    wt = _weight_type(weight_type)
    rows, cols = int(rows), int(cols)
    w = _check_weight(weight_raw, wt, rows, cols)
    x = _check_activations(x, cols)
    path = resolve_path(isa)
    xq = quantize_act(x.reshape(-1, cols), wt, path)
    n_vec = xq.shape[0]
    y = np.empty((n_vec, rows), dtype=np.float32)
    _core().matmul(int(wt), w, row_nbytes(wt, cols), cols, xq, xq.shape[1], n_vec, y, rows, 0, rows, path)
    return y[0] if x.ndim == 1 else y


def matmul_bench(weight_raw: np.ndarray, weight_type, rows: int, cols: int, x: np.ndarray, n_iter: int,
                 isa: str | None = None) -> float:
    """Seconds for `n_iter` back-to-back single-thread matmuls (activation quantization excluded)."""
    wt = _weight_type(weight_type)
    rows, cols = int(rows), int(cols)
    w = _check_weight(weight_raw, wt, rows, cols)
    x = _check_activations(x, cols)
    if int(n_iter) < 1:
        raise ValueError(f"n_iter must be >= 1, got {n_iter}")
    path = resolve_path(isa)
    xq = quantize_act(x.reshape(-1, cols), wt, path)
    y = np.empty((xq.shape[0], rows), dtype=np.float32)
    return _core().matmul_bench(int(wt), w, row_nbytes(wt, cols), cols, xq, xq.shape[1], xq.shape[0], y, rows,
                                0, rows, path, int(n_iter))
