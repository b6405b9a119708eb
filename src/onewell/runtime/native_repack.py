"""The native load-time layouts (onewell/_native/kernels/q8_0_r16.h, q4_1_r16.h, q8_0_r8.h, q4_r8.h, qk_r8.h):
repacking and matmuls.

    layout_for(weight_type, layout=None)           -> Q8_0_R16 (Q8_0, Q5_0 in) or Q4_1_R16 (Q4_1 in); or `layout`
                                                      (an R8 layout: Q8_0_R8, Q4_1_R8, Q5_0_R8, Q4_0_R8,
                                                      IQ4_NL_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8, IQ4_XS_R8) after
                                                      checking it is built from weight_type
    repack(raw, weight_type, rows, cols, layout=None) -> uint8 [rows, stride] in layout_for(...), 64-byte aligned
    quantize_act(x, isa=None)                      -> uint8 [n_vec, act bytes] (or [act bytes]): the R16 layouts'
    matmul(packed, rows, cols, x, isa=None, layout=Q8_0_R16) -> float32 [n_vec, rows] (or [rows])
    matmul_bench(packed, rows, cols, x, n_iter, isa=None, layout=Q8_0_R16) -> seconds

The R8 layouts take their file type's plain activations (Q8_0; Q8_1 for Q4_1 R8, Q8_K for the K-quants'). The numpy
twins are in onewell.quant.repack, onewell.quant.repack_r8, onewell.quant.repack_q4_r8 and
onewell.quant.repack_qk_r8 (same bytes). Arguments are checked here before C sees them.
"""
from __future__ import annotations

import mmap

import numpy as np

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant.repack import ACT_Q8_0_R16, Q4_1_R16, Q8_0_R16, act_row_nbytes, q4_1_row_stride, row_stride
from onewell.quant.repack_q4_r8 import IQ4_NL_R8, Q4_0_R8, Q4_1_R8, Q5_0_R8
from onewell.quant.repack_q4_r8 import row_bytes as q4_r8_row_bytes
from onewell.quant.repack_qk_r8 import IQ4_XS_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8
from onewell.quant.repack_qk_r8 import row_bytes as qk_r8_row_bytes
from onewell.quant.repack_r8 import Q8_0_R8
from onewell.quant.repack_r8 import row_bytes as r8_row_bytes
from onewell.runtime.native_kernels import _check_activations, resolve_path
from onewell.runtime.native_kernels import quantize_act as quantize_plain_act
from onewell.runtime.native_types import layout_sources, repack_layouts

LAYOUTS = repack_layouts()   # ggml type -> its R16 layout, from the native type-traits table
SOURCE_TYPES = frozenset(t for t, layout in LAYOUTS.items() if layout == Q8_0_R16)   # repacked to Q8_0 R16
_STRIDE = {Q8_0_R16: row_stride, Q4_1_R16: q4_1_row_stride, Q8_0_R8: r8_row_bytes,
           **{layout: (lambda cols, layout=layout: q4_r8_row_bytes(layout, cols))
              for layout in (Q4_1_R8, Q5_0_R8, Q4_0_R8, IQ4_NL_R8)},
           **{layout: (lambda cols, layout=layout: qk_r8_row_bytes(layout, cols))
              for layout in (Q4_K_R8, Q5_K_R8, Q6_K_R8, IQ4_XS_R8)}}
ALIGN = 64
HUGE_PAGE = 2 << 20


def aligned_empty(nbytes: int, align: int = ALIGN) -> np.ndarray:
    """A uint8 array of nbytes whose data starts on an `align`-byte boundary.

    Big buffers are their own anonymous mapping (page-aligned) advised to use transparent huge pages where the
    kernel offers them: first-touching a large 4 KiB-paged buffer costs one page fault per 4 KiB (measured here
    ~0.25 s for 146 MB in a VM, 10x the repack itself), and huge pages also spare the matmuls TLB misses.
    Small ones (and systems without madvise) get a numpy allocation with slack, sliced to the alignment."""
    if nbytes >= HUGE_PAGE and mmap.PAGESIZE % align == 0:
        region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(region, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                region.madvise(mmap.MADV_HUGEPAGE)
            except OSError:   # a kernel without transparent huge pages: plain pages then
                pass
        return np.frombuffer(region, dtype=np.uint8)   # the array keeps the mapping alive
    base = np.empty(nbytes + align, dtype=np.uint8)
    skip = -base.ctypes.data % align
    return base[skip:skip + nbytes]


def _dims(rows, cols) -> tuple[int, int]:
    if isinstance(rows, bool) or isinstance(cols, bool) or int(rows) != rows or int(cols) != cols:
        raise ValueError(f"rows and cols must be integers, got {rows!r}, {cols!r}")
    if rows <= 0 or cols <= 0 or cols % 32:
        raise ValueError(f"need rows > 0 and cols a positive multiple of 32, got {rows} x {cols}")
    return int(rows), int(cols)


def layout_for(weight_type, layout: int | None = None) -> int:
    """The repacked layout a ggml weight type converts to: Q8_0_R16 (Q8_0, Q5_0) or Q4_1_R16 (Q4_1), or `layout`
    if given (that one, or a layout built from the type on request: Q8_0_R8 from Q8_0)."""
    try:
        wt = GGMLType(weight_type)
    except ValueError:
        raise UnsupportedError(f"unknown tensor type {weight_type!r}") from None
    if layout is not None and layout_sources().get(layout) == wt:
        return int(layout)
    if wt not in LAYOUTS:
        raise UnsupportedError(f"only Q8_0, Q5_0 (to Q8_0 R16), Q4_1 (to Q4_1 R16) and the sources of the R8 layouts "
                               f"named (Q8_0, Q4_1, Q5_0, Q4_0, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS) repack, not {wt.name}")
    if layout is not None and layout != LAYOUTS[wt]:
        raise UnsupportedError(f"{wt.name} does not repack to layout {layout!r}")
    return LAYOUTS[wt]


def _layout_stride(layout, cols: int) -> int:
    if layout not in _STRIDE:
        raise ValueError(f"layout must be one of {sorted(_STRIDE)} (Q8_0_R16, Q4_1_R16, Q8_0_R8, Q4_1_R8, "
                         f"Q5_0_R8, Q4_0_R8, IQ4_NL_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8, IQ4_XS_R8), got {layout!r}")
    return _STRIDE[layout](cols)


def repack(raw: np.ndarray, weight_type, rows: int, cols: int, layout: int | None = None) -> np.ndarray:
    """Raw Q8_0, Q5_0 or Q4_1 bytes of a rows x cols matrix -> a new 64-byte aligned uint8 [rows, stride] in
    layout_for(weight_type, layout) (lossless for all). Runs in C with the GIL released."""
    layout = layout_for(weight_type, layout)
    wt = GGMLType(weight_type)
    rows, cols = _dims(rows, cols)
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or not raw.flags.c_contiguous:
        raise ValueError("raw must be a C-contiguous uint8 numpy array")
    src_row = row_nbytes(wt, cols)
    if raw.size != rows * src_row:
        raise ValueError(f"{wt.name} {rows} x {cols} takes {rows * src_row} bytes, got {raw.size}")
    stride = _layout_stride(layout, cols)
    out = aligned_empty(rows * stride)
    _core.repack_r16(int(wt), raw.reshape(-1), src_row, rows, cols, out, stride, layout)
    return out.reshape(rows, stride)


def quantize_act(x: np.ndarray, isa: str | None = None) -> np.ndarray:
    """float32 [n_vec, cols] (or [cols]) -> the R16 activation rows (same bytes as quant.repack.quantize_act_r16)."""
    path = resolve_path(isa)
    x = _check_activations(x, None)
    n_vec, cols = (1, x.shape[0]) if x.ndim == 1 else x.shape
    _dims(1, cols)
    out = np.empty((n_vec, act_row_nbytes(cols)), dtype=np.uint8)
    _core.quantize_act(ACT_Q8_0_R16, x, cols, n_vec, out, path)
    return out[0] if x.ndim == 1 else out


def _check_packed(packed, rows: int, cols: int, layout=Q8_0_R16) -> np.ndarray:
    stride = _layout_stride(layout, cols)
    if not isinstance(packed, np.ndarray) or packed.dtype != np.uint8 or not packed.flags.c_contiguous:
        raise ValueError("packed weights must be a C-contiguous uint8 numpy array")
    if packed.size != rows * stride:
        raise ValueError(f"layout {layout} {rows} x {cols} takes {rows * stride} bytes, got {packed.size}")
    return packed.reshape(-1)


def _activations(x: np.ndarray, cols: int, path: str, layout: int) -> np.ndarray:
    """The activation rows a layout takes: the file type's plain ones for the R8 layouts (Q8_0, or Q8_1 for Q4_1
    R8), the R16 rows for the others"""
    x = x.reshape(-1, cols)
    if layout in layout_sources():   # the activations of the type the layout is built from
        return quantize_plain_act(x, layout_sources()[layout], path)
    return quantize_act(x, path)


def matmul(packed: np.ndarray, rows: int, cols: int, x: np.ndarray, isa: str | None = None,
           layout: int = Q8_0_R16) -> np.ndarray:
    """y = W @ x for W in a load-time layout (from repack; `layout` says which) and float32 x [n_vec, cols] (or
    [cols])."""
    rows, cols = _dims(rows, cols)
    w = _check_packed(packed, rows, cols, layout)
    x = _check_activations(x, cols)
    path = resolve_path(isa)
    xq = _activations(x, cols, path, layout)
    y = np.empty((xq.shape[0], rows), dtype=np.float32)
    _core.matmul(layout, w, _layout_stride(layout, cols), cols, xq, xq.shape[1], xq.shape[0], y, rows, 0, rows, path)
    return y[0] if x.ndim == 1 else y


def matmul_bench(packed: np.ndarray, rows: int, cols: int, x: np.ndarray, n_iter: int,
                 isa: str | None = None, layout: int = Q8_0_R16) -> float:
    """Seconds for `n_iter` back-to-back single-thread matmuls on a load-time layout (quantization excluded)."""
    rows, cols = _dims(rows, cols)
    w = _check_packed(packed, rows, cols, layout)
    x = _check_activations(x, cols)
    if int(n_iter) < 1:
        raise ValueError(f"n_iter must be >= 1, got {n_iter}")
    path = resolve_path(isa)
    xq = _activations(x, cols, path, layout)
    y = np.empty((xq.shape[0], rows), dtype=np.float32)
    return _core.matmul_bench(layout, w, _layout_stride(layout, cols), cols, xq, xq.shape[1], xq.shape[0], y, rows, 0, rows,
                              path, int(n_iter))
