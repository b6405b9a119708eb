"""ggml's own codecs through ctypes, to check onewell's numpy twins bit for bit (needs a llama.cpp build).

    python scripts/ggml_oracle.py LIBGGML_BASE              # self-check: random tensors, every type below
    from scripts.ggml_oracle import GGML; g = GGML(path); g.dequantize(type_id, raw, n); g.quantize(type_id, x)

`LIBGGML_BASE` is libggml-base.so of a llama.cpp build (build/bin/libggml-base.so). Only the test-data
generator and this self-check use it; the tests themselves run from stored data (tests/data/README.md).
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np


class _Traits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p), ("from_float_ref", ctypes.c_void_p)]


_TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class GGML:
    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.lib.ggml_get_type_traits.restype = ctypes.POINTER(_Traits)
        self.lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        self.lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        self.lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]

    def traits(self, t: int) -> _Traits:
        return self.lib.ggml_get_type_traits(t).contents

    def dequantize(self, t: int, raw: np.ndarray, n: int) -> np.ndarray:
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        if t == 0:   # F32 has no to_float
            return raw.view(np.float32).copy()
        out = np.empty(n, np.float32)
        _TO_FLOAT(self.traits(t).to_float)(raw.ctypes.data, out.ctypes.data, n)
        return out

    def quantize(self, t: int, x: np.ndarray, imatrix: np.ndarray | None = None) -> np.ndarray:
        """Rows of x (2-D float32) as llama-quantize writes them (ggml_quantize_chunk, no imatrix by default)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        rows, n_per_row = x.shape
        tr = self.traits(t)
        out = np.zeros(rows * n_per_row // tr.blck_size * tr.type_size, np.uint8)
        qw = None if imatrix is None else np.ascontiguousarray(imatrix, np.float32).ctypes.data
        size = self.lib.ggml_quantize_chunk(t, x.ctypes.data, out.ctypes.data, 0, rows, n_per_row, qw)
        assert size == out.size
        return out


def main(path: str) -> int:
    sys.path.insert(0, "src")
    from onewell.gguf.constants import GGMLType as T
    from onewell.quant import QUANTIZE_TYPES, dequantize, quantize

    g = GGML(path)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 512)) * rng.uniform(0.01, 2, (64, 1))).astype(np.float32)
    x[3, :256] = 0.0
    failures = 0
    for t in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS, T.BF16, T.Q4_0, T.Q5_0, T.Q5_1, T.Q8_0):
        raw = g.quantize(int(t), x)
        ours = dequantize(t, raw, x.shape).reshape(-1)
        same = np.array_equal(ours.view(np.uint32), g.dequantize(int(t), raw, x.size).view(np.uint32))
        line = f"{t.name:7s} dequantize {'identical' if same else 'DIFFERENT'}"
        failures += not same
        if t in QUANTIZE_TYPES:
            enc = quantize(t, x)
            line += f", encode: {int((enc != raw).sum())} of {raw.size} bytes differ"
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
