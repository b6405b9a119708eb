"""Test vectors for the C kernel harness (kernel_harness.c), made by the numpy twins on any machine.

    python tests/native_harness/make_vectors.py OUT.bin

Every weight type with a native kernel, at the shapes tests/test_native_kernels.py uses (odd tails, several
vectors), with random weights (every quant bit pattern) and, for the activation quantizers, the edge rows of
that test (ties, zero blocks, tiny and huge scales). One file, little-endian, read by kernel_harness.c:

    "OWKV" u32 version=1 u32 n_cases, then per case:
    i32 weight type, i32 activation type, i64 rows, i64 cols, i32 n_vec, u64 row_bytes, u64 act_bytes,
    u8 weights[rows*row_bytes], f32 x[n_vec*cols], u8 act[n_vec*act_bytes]  (the twin's quantized x),
    f64 exact[n_vec*rows]  (dequantize(W) @ dequantize(act), float64), f64 magnitude[n_vec*rows]  (|W| @ |act|)
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the twins' helpers live there
from test_native_kernels import WEIGHT_TYPES, edge_activations, random_weight, shapes_for, twin_product  # noqa: E402

from onewell.gguf.constants import GGMLType as T, row_nbytes  # noqa: E402
from onewell.quant.act_formats import act_type_for, quantize_act  # noqa: E402

VERSION = 1


def cases():
    for wt in WEIGHT_TYPES:
        rng = np.random.default_rng(1000 + int(wt))
        shapes = shapes_for(wt)
        for i, (rows, cols, n_vec) in enumerate(shapes):
            raw = random_weight(rng, wt, rows, cols)
            if i == len(shapes) - 1 and cols % 32 == 0:
                x = edge_activations(cols)          # the quantizers' edge cases, against a last weight matrix
                if act_type_for(wt) == T.Q8_1:
                    x = x[:-1]   # its huge row overflows Q8_1's fp16 block sum s to inf: no finite product
            else:
                x = rng.standard_normal((n_vec, cols)).astype(np.float32)
            yield wt, raw, rows, cols, x


def write(path: Path) -> int:
    all_cases = list(cases())
    with open(path, "wb") as f:
        f.write(b"OWKV" + struct.pack("<II", VERSION, len(all_cases)))
        for wt, raw, rows, cols, x in all_cases:
            at = act_type_for(wt)
            act = quantize_act(at, x).reshape(len(x), -1)
            exact, magnitude, _, _ = twin_product(raw, wt, rows, cols, x)
            f.write(struct.pack("<iiqqiQQ", int(wt), int(at), rows, cols, len(x), row_nbytes(wt, cols),
                                act.shape[1]))
            f.write(np.ascontiguousarray(raw, np.uint8).tobytes())
            f.write(np.ascontiguousarray(x, "<f4").tobytes())
            f.write(np.ascontiguousarray(act, np.uint8).tobytes())
            f.write(np.ascontiguousarray(exact, "<f8").tobytes())
            f.write(np.ascontiguousarray(magnitude, "<f8").tobytes())
    return len(all_cases)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(f"make_vectors: {write(Path(sys.argv[1]))} cases -> {sys.argv[1]}")
