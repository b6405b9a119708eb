"""nomic-embed-text-v1.5 (F16, arch nomic-bert) against llama.cpp's embeddings of the same texts
(tests/data/embed_nomic-embed-text-v1.5-f16.jsonl): cosine >= 0.999 for every text, on the numpy reference and
the native executor at the SIMD path of each ISA family, AVX2 or NEON (matmul kernels and ops; all texts in one
batched call), and the generic path (its two shortest texts: its scalar F16 dot takes about 2 minutes for all six
on this machine; all six were checked once and all passed).

Measured here (6 texts, native avx2): min cosine 0.9999997. What a bug costs (min cosine, checked once by editing
the spec): RoPE "normal" instead of "neox" 0.903, no token-type row 0.922, causal attention (reference) 0.735.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import f16_batch_atol, read_jsonl

from onewell.gguf import GGUFReader
from onewell.models.registry import load_spec
from onewell.runtime.embedding import Embedder
from onewell.runtime.native_kernels import available_paths
from onewell.runtime.native_ops import KERNEL_PATH_OPS_ISA, ops_isa, set_ops_isa
from onewell.tokenizer import Tokenizer

pytestmark = pytest.mark.model

ROWS = read_jsonl("embed_nomic-embed-text-v1.5-f16.jsonl")
MIN_COSINE = 0.999


@pytest.fixture(scope="module")
def reader(nomic_embed_path):
    return GGUFReader(nomic_embed_path)


@pytest.fixture(scope="module")
def spec(reader):
    return load_spec(reader)


@pytest.fixture(scope="module")
def tokenizer(reader):
    return Tokenizer.from_metadata(reader.metadata)


def cosines_of(vectors: np.ndarray, rows: list[int]) -> list[float]:
    gold = np.array([ROWS[i]["embedding"] for i in rows], dtype=np.float64)
    gold /= np.linalg.norm(gold, axis=1, keepdims=True)
    return [float(np.dot(v, g)) for v, g in zip(vectors.astype(np.float64), gold)]


def cosines(vectors: np.ndarray) -> list[float]:
    return cosines_of(vectors, list(range(len(ROWS))))


def test_tokenizer_gives_llamacpp_ids(tokenizer, spec):
    embedder_tok = [tokenizer.encode(r["text"], add_bos=True, parse_special=True) for r in ROWS]
    assert embedder_tok == [r["ids"] for r in ROWS]


def test_reference_matches_llamacpp(spec, tokenizer):
    vectors = Embedder(spec, tokenizer, backend="reference").embed([r["text"] for r in ROWS])
    assert vectors.shape == (len(ROWS), 768)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert min(cosines(vectors)) >= MIN_COSINE, cosines(vectors)


# the generic path's F16 dot is scalar C (about 20x slower than AVX2): its two shortest texts only
SHORTEST = sorted(range(len(ROWS)), key=lambda i: len(ROWS[i]["ids"]))[:2]
ALL = list(range(len(ROWS)))


# One SIMD path per ISA family, the one this CPU has. aarch64: "neon", which every aarch64 CPU has; neon-dotprod's F16
# dot is the same source (no integer dot in it) and its ops are the same NEON ops. Under qemu the NEON F16 dot
# and ops are as slow per token as the generic path's scalar C (qemu emulates vector float arithmetic lane by
# lane), so this case takes about 10 minutes there.
@pytest.mark.parametrize("path, rows", [(p, rows) for p, rows in [("generic", SHORTEST), ("avx2", ALL), ("neon", ALL)]
                                         if p in available_paths()])   # this CPU's family only, nothing skipped
def test_native_matches_llamacpp(spec, tokenizer, path, rows):
    previous = ops_isa()
    set_ops_isa(KERNEL_PATH_OPS_ISA[path])   # the ops (LayerNorm, attention, SwiGLU) on the matmuls' ISA
    try:
        embedder = Embedder(spec, tokenizer, backend="native", threads=2, isa=path)
        assert embedder.engine.info()["kpath"] == path
        vectors = embedder.embed([ROWS[i]["text"] for i in rows])
    finally:
        set_ops_isa(previous)
    got = cosines_of(vectors, rows)
    assert min(got) >= MIN_COSINE, got


def test_batching_does_not_change_a_vector(spec, tokenizer):
    """All texts in one step (block-diagonal attention) = each text alone; and steps cut by max_batch. Exactly
    where F16 batches are exact; on the AVX2 paths a step of 32+ tokens runs the float GEMM (f16_batch_atol)."""
    embedder = Embedder(spec, tokenizer, backend="native", threads=2)
    rows = ROWS[:3]   # 17, 19 and 16 tokens
    texts = [r["text"] for r in rows]
    together = embedder.embed(texts)
    n_tokens = sum(len(r["ids"]) for r in rows)
    assert len(embedder.engine.steps([np.zeros(len(r["ids"]), np.int32) for r in rows])) == 1
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=f16_batch_atol(n_tokens))
    assert min(float(a @ b) for a, b in zip(together, alone)) >= 1 - 1e-6
    embedder.engine.max_batch = 36   # forces two steps: [17, 19], [16]
    assert len(embedder.engine.steps([np.zeros(len(r["ids"]), np.int32) for r in rows])) == 2
    np.testing.assert_allclose(embedder.embed(texts), together, atol=f16_batch_atol(36))


def test_bad_inputs_are_clear_errors(spec, tokenizer):
    from onewell.errors import ContextOverflowError

    embedder = Embedder(spec, tokenizer, backend="native", threads=1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        embedder.embed_ids([[101, 10**6, 102]])
    with pytest.raises(ValueError, match="non-empty"):
        embedder.embed_ids([[]])
    with pytest.raises(ContextOverflowError, match="more than the 2048"):
        embedder.embed_ids([[101] * 2049])
