"""Small random-weight GGUF models of architectures no registry model covers (qwen3, llama 3.x, phi3), built
from a seed with the real vocabularies, so tests can compare onewell with logits llama.cpp computed once on
exactly the same files (tests/data/llamacpp_logits_random.json, made by scripts/record_llamacpp_logits.sh).

Everything is a function of the recipe: numpy's Generator(PCG64) with the recipe's seed draws every tensor in
a fixed order, and onewell's GGUFWriter writes them. `weights_sha256` fingerprints the tensor data so a test
can tell "the builder changed" apart from "the engine changed".

Weights are scaled so that each matmul keeps activations near unit variance (std 1/sqrt(fan-in)) and norm
weights sit around 1; attention is sharp enough, and the logits spread enough (std ~ 4), that a wrong RoPE
pairing, a missing norm or a swapped half of a fused tensor moves log-probabilities by far more than
llama.cpp's own 8-bit/f16 rounding does.

    python tests/random_models.py OUT_DIR      # writes OUT_DIR/<name>.gguf for every recipe, prints the paths
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onewell.gguf import GGMLType, GGUFReader, GGUFWriter, ValueType
from onewell.models.common import Hyperparameters
from onewell.quant import quantize

VOCAB_DIR = Path(__file__).parent / "data" / "vocab"
U32, F32 = ValueType.UINT32, ValueType.FLOAT32

# Llama 3.x RoPE scaling as the converter turns it into rope_freqs.weight (convert_hf_to_gguf, LlamaModel):
# factor, low_freq_factor, high_freq_factor, original_max_position_embeddings. Llama 3.2 uses (32, 1, 4, 8192);
# at the few positions a test runs, only the first handful of frequencies turn, so the recipe shrinks the original
# context to 16 positions: most frequencies get the full factor, two are interpolated, and the factors change the
# angles (and so the logits) at the positions the test checks.
LLAMA3_ROPE_SCALING = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_context=16)


@dataclass(frozen=True)
class Recipe:
    name: str
    arch: str
    vocab: str                   # tests/data/vocab/ggml-vocab-<vocab>.gguf
    seed: int
    hp: Hyperparameters          # what the file's {arch}.* metadata says
    tied: bool
    types: dict[str, GGMLType]   # weight type by role (matrices); norms and rope_freqs are F32
    tokenizer_overrides: dict = field(default_factory=dict)
    text: str = "The quick brown fox, aged 12, jumped over 3 lazy dogs in Zürich!"


Q8, F16, FP32 = GGMLType.Q8_0, GGMLType.F16, GGMLType.F32
MIXED = {
    # Qwen3: head_dim set by key_length, so n_head * head_dim (128) differs from n_embd (64), as in Qwen3-0.6B;
    # tied embeddings; the Qwen2 byte-level BPE (Qwen3's tokenizer: same tokens and merges, pre-tokenizer 'qwen2').
    "qwen3": Recipe("qwen3", "qwen3", "qwen35", seed=3, tied=True,
                    hp=Hyperparameters(n_embd=64, n_layer=3, n_head=4, n_head_kv=2, head_dim=32, n_ff=192,
                                       n_ctx_train=4096, rope_theta=1e6, rms_eps=1e-6),
                    types=dict(token_embd=F16, wq=F16, wk=F16, wv=Q8, wo=F16, w_gate=Q8, w_up=Q8, w_down=F16),
                    tokenizer_overrides={"tokenizer.ggml.pre": "qwen2", "tokenizer.ggml.add_bos_token": False}),
    # Llama 3.2-like: GQA 4:1, rope_freqs.weight, tied Q8_0 embeddings, the llama-bpe vocabulary (128,256 tokens).
    "llama3": Recipe("llama3", "llama", "llama-bpe", seed=31, tied=True,
                     hp=Hyperparameters(n_embd=128, n_layer=2, n_head=4, n_head_kv=1, head_dim=32, n_ff=256,
                                        n_ctx_train=4096, rope_theta=500000.0, rms_eps=1e-5),
                     types=dict(token_embd=Q8, wq=Q8, wk=Q8, wv=F16, wo=Q8, w_gate=F16, w_up=Q8, w_down=FP32),
                     tokenizer_overrides={"tokenizer.ggml.add_bos_token": True}),
    # Phi-3 mini-like: fused attn_qkv and ffn_up (gate rows, then up rows), separate output, SentencePiece vocab.
    "phi3": Recipe("phi3", "phi3", "phi-3", seed=7, tied=False,
                   hp=Hyperparameters(n_embd=128, n_layer=2, n_head=4, n_head_kv=2, head_dim=32, n_ff=160,
                                      n_ctx_train=4096, rope_theta=10000.0, rms_eps=1e-5),
                   types=dict(token_embd=F16, w_qkv=Q8, wo=F16, w_gate_up=Q8, w_down=Q8, output=Q8)),
}


def all_f32(r: Recipe) -> Recipe:
    """The same model with every weight in F32: llama.cpp then rounds only its f16 KV cache, so the comparison
    is tight enough to see small errors (a RoPE base off by 2x) that 8-bit activation noise would hide."""
    return dataclasses.replace(r, name=f"{r.name}-f32", types={role: FP32 for role in r.types})


def all_bf16(r: Recipe) -> Recipe:
    """The same model with every weight matrix in BF16: llama.cpp rounds the activations to bf16 for them, as
    onewell's AVX512-BF16 kernels do (the other kernel paths keep exact float32 activations)."""
    return dataclasses.replace(r, name=f"{r.name}-bf16", types={role: GGMLType.BF16 for role in r.types})


RECIPES = {**MIXED, **{f"{name}-f32": all_f32(r) for name, r in MIXED.items()}, "qwen3-bf16": all_bf16(MIXED["qwen3"])}


def llama3_rope_factors(head_dim: int, theta: float, factor: float, low_freq_factor: float,
                        high_freq_factor: float, original_context: int) -> np.ndarray:
    """rope_freqs.weight as llama.cpp's converter computes it for rope_type 'llama3' ([head_dim/2] float32)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)
    low_wavelen, high_wavelen = original_context / low_freq_factor, original_context / high_freq_factor
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def _tensors(r: Recipe, n_vocab: int) -> list[tuple[str, GGMLType, np.ndarray]]:
    """(GGUF name, type, float32 values in numpy order) of every tensor, drawn in one fixed order."""
    rng = np.random.default_rng(r.seed)
    h = r.hp
    d, q, kv = h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim

    def matrix(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * (gain / math.sqrt(cols))).astype(np.float32)

    def norm(n: int, low: float = 0.6, high: float = 1.4) -> np.ndarray:
        return rng.uniform(low, high, n).astype(np.float32)

    t = r.types
    out = [("token_embd.weight", t["token_embd"], (rng.standard_normal((n_vocab, d)) * 0.5).astype(np.float32))]
    for i in range(h.n_layer):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", FP32, norm(d)))
        if r.arch == "phi3":
            out.append((b + "attn_qkv.weight", t["w_qkv"], matrix(q + 2 * kv, d)))
        else:
            out += [(b + "attn_q.weight", t["wq"], matrix(q, d)), (b + "attn_k.weight", t["wk"], matrix(kv, d)),
                    (b + "attn_v.weight", t["wv"], matrix(kv, d))]
        if r.arch == "qwen3":
            out += [(b + "attn_q_norm.weight", FP32, norm(h.head_dim, 0.5, 2.0)),
                    (b + "attn_k_norm.weight", FP32, norm(h.head_dim, 0.5, 2.0))]
        out.append((b + "attn_output.weight", t["wo"], matrix(d, q)))
        out.append((b + "ffn_norm.weight", FP32, norm(d)))
        if r.arch == "phi3":
            out.append((b + "ffn_up.weight", t["w_gate_up"], matrix(2 * h.n_ff, d, gain=2.0)))
        else:
            out += [(b + "ffn_gate.weight", t["w_gate"], matrix(h.n_ff, d, gain=2.0)),
                    (b + "ffn_up.weight", t["w_up"], matrix(h.n_ff, d))]
        out.append((b + "ffn_down.weight", t["w_down"], matrix(d, h.n_ff)))
    out.append(("output_norm.weight", FP32, norm(d, 0.8, 1.2)))
    if not r.tied:
        out.append(("output.weight", t["output"], matrix(n_vocab, d, gain=4.0)))
    if r.arch == "llama":
        out.append(("rope_freqs.weight", FP32,
                    llama3_rope_factors(h.head_dim, h.rope_theta, **LLAMA3_ROPE_SCALING)))
    return out


def _hyperparameters(r: Recipe, n_vocab: int) -> list[tuple[str, object, ValueType]]:
    a, h = r.arch, r.hp
    meta = [
        (f"{a}.context_length", h.n_ctx_train, U32), (f"{a}.embedding_length", h.n_embd, U32),
        (f"{a}.block_count", h.n_layer, U32), (f"{a}.feed_forward_length", h.n_ff, U32),
        (f"{a}.attention.head_count", h.n_head, U32), (f"{a}.attention.head_count_kv", h.n_head_kv, U32),
        (f"{a}.rope.freq_base", h.rope_theta, F32), (f"{a}.attention.layer_norm_rms_epsilon", h.rms_eps, F32),
    ]
    if a == "qwen3":   # Qwen3's converter writes the head size: it is not n_embd / n_head
        meta += [(f"{a}.attention.key_length", h.head_dim, U32), (f"{a}.attention.value_length", h.head_dim, U32)]
    if a in ("llama", "phi3"):
        meta.append((f"{a}.rope.dimension_count", h.head_dim, U32))
    if a == "llama":
        meta.append((f"{a}.vocab_size", n_vocab, U32))
    if a == "phi3":
        # Phi-3 files carry a sliding window (2047 for Phi-3-mini) that llama.cpp ignores; a small one here makes
        # the recorded logits show that onewell ignores it too
        meta += [(f"{a}.rope.scaling.original_context_length", h.n_ctx_train, U32),
                 (f"{a}.attention.sliding_window", 8, U32)]
    return meta


@functools.lru_cache(maxsize=None)
def tokenizer_metadata(vocab: str) -> dict[str, tuple[object, tuple[ValueType, ValueType | None]]]:
    """tokenizer.* keys of a vocabulary file with their GGUF types (read once: the token lists are long)."""
    with GGUFReader(VOCAB_DIR / f"ggml-vocab-{vocab}.gguf") as reader:
        return {k: (v, reader.metadata_types[k]) for k, v in reader.metadata.items() if k.startswith("tokenizer.")}


def build(r: Recipe, path: str | Path) -> Path:
    """Write the recipe's model to `path` (a GGUF file llama.cpp and onewell both load)."""
    tokenizer = tokenizer_metadata(r.vocab)
    n_vocab = len(tokenizer["tokenizer.ggml.tokens"][0])
    w = GGUFWriter(path)
    w.add_metadata("general.architecture", r.arch)
    w.add_metadata("general.name", f"onewell random {r.name} (seed {r.seed})")
    for key, value, vtype in _hyperparameters(r, n_vocab):
        w.add_metadata(key, value, vtype)
    for key, (value, (vtype, elem)) in tokenizer.items():
        if key not in r.tokenizer_overrides:
            w.add_metadata(key, value, vtype, elem)
    for key, value in r.tokenizer_overrides.items():
        w.add_metadata(key, value)
    for name, ggml_type, values in _tensors(r, n_vocab):
        w.add_tensor(name, ggml_type, tuple(reversed(values.shape)), quantize(ggml_type, values))
    return w.write()


def weights_sha256(path: str | Path) -> str:
    """sha256 over every tensor's name and raw bytes, in file order: the model, whatever the file's padding."""
    digest = hashlib.sha256()
    with GGUFReader(path) as reader:
        for name in reader.tensors:
            digest.update(name.encode())
            digest.update(reader.tensor_data(name).tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for recipe in RECIPES.values():
        print(build(recipe, out_dir / f"{recipe.name}.gguf"))
