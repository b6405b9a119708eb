"""Write tests/data/ggml_codecs.npz: ggml's own encodings and decodings of a few small tensors (needs llama.cpp).

    python scripts/make_ggml_codec_data.py LIBGGML_BASE SMOLLM2_GGUF

Inputs: a seeded random tensor (rows of varied scale, an all-zero block, a row with a single outlier), the first
rows of SmolLM2-135M's blk.0.ffn_down (real weights, decoded from the registry's Q4_1 file) and llama.cpp's
test-quantize-fns data (0.1 + 2 cos i). For each type, ggml's
ggml_quantize_chunk (what llama-quantize calls, no importance matrix) gives the bytes, and ggml's to_float their
float32 values, stored as a sha256. The tests compare onewell's codecs and native kernels against them without
llama.cpp.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ggml_oracle import GGML  # noqa: E402
from onewell.gguf import GGUFReader  # noqa: E402
from onewell.gguf.constants import GGMLType as T  # noqa: E402
from onewell.quant import dequantize  # noqa: E402

TYPES = (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS, T.Q4_0, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16)
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "ggml_codecs.npz"


def inputs(smollm: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2026)
    rand = (rng.standard_normal((16, 512)) * rng.uniform(1e-3, 4.0, (16, 1))).astype(np.float32)
    rand[2, 256:] = 0.0          # an all-zero super-block
    rand[5, :] *= 1e-3
    rand[5, 17] = 3.0            # one outlier sets every scale
    rand[7, :32] = -0.5          # a flat block
    with GGUFReader(smollm) as reader:
        info = reader.tensors["blk.0.ffn_down.weight"]
        real = dequantize(info.ggml_type, reader.tensor_data(info.name), info.shape)[:8].copy()
    # test-quantize-fns' data: 0.1 + 2 cos(i + offset), 32 * 128 values (one row here)
    i = np.arange(32 * 128, dtype=np.float32)
    cos = (np.float32(0.1) + np.float32(2) * np.cos(i)).astype(np.float32)[None]
    return {"random": rand, "real": real, "cos": cos}


def main(lib: str, smollm: str) -> None:
    g = GGML(lib)
    data = {}
    for src, x in inputs(smollm).items():
        data[f"input_{src}"] = x
        for t in TYPES:
            raw = g.quantize(int(t), x)
            values = g.dequantize(int(t), raw, x.size)
            data[f"{t.name}_{src}_bytes"] = raw
            data[f"{t.name}_{src}_f32_sha256"] = np.array(hashlib.sha256(values.tobytes()).hexdigest())
    np.savez_compressed(OUT, **data)
    print(OUT, OUT.stat().st_size, "bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
