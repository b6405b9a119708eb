"""Seed inputs for GGUF fuzzing: small files that reach every stage of loading a model.

Kinds of seed:
  * tiny models derived from the real default models' headers: the real metadata (general.*, tokenizer,
    chat template) with the vocabulary cut to a few hundred tokens and the hyperparameters shrunk, plus
    tensors of the real files' types (Q8_0/Q4_1 for SmolLM2, Q5_0/Q8_0/Q6_K and biases for Qwen2.5), so
    a seed loads, tokenizes and runs a native forward step in milliseconds;
  * the real headers themselves (vocabulary cut the same way, full tensor table), ending where the tensor
    data would begin: they exercise the reader on real metadata and real tensor tables;
  * synthetic files from tests/gguf_builders.py (every metadata value kind, three tensor types).
Without the cached real models, the tiny models are built from a synthetic tokenizer instead, so the
corpus never depends on a download.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onewell.gguf import GGUFReader
from onewell.gguf._encode import encode_string, encode_value
from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType, ValueType
from onewell.gguf.writer import GGUFWriter

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import gguf_builders  # noqa: E402  (lives with the tests; shared on purpose)

MODEL_DIR = Path.home() / ".cache" / "onewell" / "models"
SMOLLM_FILE = "smollm2-135m-instruct-q4_1.gguf"
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

KEEP_TOKENS = 320       # first ids of the real vocabulary (specials and the 256 byte tokens come first or are added)
MAX_SPECIALS = 24       # non-normal tokens kept from past KEEP_TOKENS (Qwen's control tokens sit at the end)
_SPECIAL_ID_KEYS = ("bos", "eos", "eot", "eom", "unknown", "padding", "sep", "cls", "mask",
                    "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep")


@dataclass(frozen=True)
class TinyShape:
    """Hyperparameters and tensor types of a tiny model of one architecture."""

    arch: str
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_layer: int
    types: dict[str, GGMLType]  # role -> type; roles as in _layer_tensors
    biases: bool
    tied: bool


LLAMA_TINY = TinyShape("llama", n_embd=32, n_head=2, n_head_kv=1, n_ff=64, n_layer=1, biases=False, tied=True,
                       types={"token_embd": GGMLType.Q8_0, "matrix": GGMLType.Q4_1, "ffn_down": GGMLType.Q4_1})
QWEN2_TINY = TinyShape("qwen2", n_embd=32, n_head=2, n_head_kv=1, n_ff=256, n_layer=1, biases=True, tied=False,
                       types={"token_embd": GGMLType.Q5_0, "output": GGMLType.Q8_0, "matrix": GGMLType.Q5_0,
                              "attn_v": GGMLType.Q8_0, "ffn_down": GGMLType.Q6_K})


# ---- vocabulary cut ------------------------------------------------------------------------------------


def cut_vocabulary(metadata: dict, types: dict, keep: int = KEEP_TOKENS) -> list[tuple[str, object, ValueType, ValueType | None]]:
    """The tokenizer.* entries of a real file, cut to its first `keep` tokens plus its special tokens; merges
    are kept only where both halves and the result survive, special ids are renumbered (or dropped)."""
    tokens = list(metadata["tokenizer.ggml.tokens"])
    token_types = np.asarray(metadata.get("tokenizer.ggml.token_type", np.ones(len(tokens), np.int32)))
    kept = list(range(min(keep, len(tokens))))
    extra = [i for i in np.flatnonzero(token_types != 1) if i >= keep][:MAX_SPECIALS]
    kept += [int(i) for i in extra]
    new_id = {old: new for new, old in enumerate(kept)}
    new_tokens = [tokens[i] for i in kept]
    vocab = set(new_tokens)
    merges = []
    for merge in metadata.get("tokenizer.ggml.merges", []):
        left, _, right = merge[1:].partition(" ")
        left = merge[0] + left
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(merge)

    out = []
    for key, value in metadata.items():
        if not key.startswith("tokenizer."):
            continue
        vtype, elem = types[key]
        if key == "tokenizer.ggml.tokens":
            value = new_tokens
        elif key == "tokenizer.ggml.token_type":
            value = np.asarray([token_types[i] for i in kept], dtype=np.asarray(value).dtype)
        elif key == "tokenizer.ggml.merges":
            value = merges
        elif key.endswith("_token_id") and key.removeprefix("tokenizer.ggml.").removesuffix("_token_id") in _SPECIAL_ID_KEYS:
            if int(value) not in new_id:
                continue
            value = new_id[int(value)]
        out.append((key, value, vtype, elem))
    return out


def synthetic_tokenizer() -> list[tuple[str, object, ValueType, ValueType | None]]:
    """A byte-level GPT-2 vocabulary (256 byte tokens, a few merges, two control tokens) for machines without
    the real models."""
    from onewell.tokenizer.bpe import spell_bytes

    byte_tokens = [spell_bytes(bytes([b])) for b in range(256)]
    merges = ["h e", "l l", "ll o", "Ġ w", "o r"]
    merged = ["he", "ll", "llo", "Ġw", "or"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + byte_tokens + merged
    token_type = np.array([3, 3, 3] + [1] * (len(tokens) - 3), dtype=np.int32)
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    S, A, I32, U32 = ValueType.STRING, ValueType.ARRAY, ValueType.INT32, ValueType.UINT32
    return [
        ("tokenizer.ggml.model", "gpt2", S, None),
        ("tokenizer.ggml.pre", "smollm", S, None),
        ("tokenizer.ggml.tokens", tokens, A, S),
        ("tokenizer.ggml.token_type", token_type, A, I32),
        ("tokenizer.ggml.merges", merges, A, S),
        ("tokenizer.ggml.eos_token_id", 2, U32, None),
        ("tokenizer.chat_template", template, S, None),
    ]


# ---- tiny models -----------------------------------------------------------------------------------------


def _general(metadata: dict, types: dict) -> list[tuple[str, object, ValueType, ValueType | None]]:
    return [(k, v, *types[k]) for k, v in metadata.items()
            if k.startswith("general.") and k not in ("general.architecture", "general.alignment")]


def _hyperparameters(shape: TinyShape, n_vocab: int) -> list[tuple[str, object, ValueType, ValueType | None]]:
    a, U32, F32 = shape.arch, ValueType.UINT32, ValueType.FLOAT32
    return [
        ("general.architecture", a, ValueType.STRING, None),
        (f"{a}.block_count", shape.n_layer, U32, None),
        (f"{a}.context_length", 64, U32, None),
        (f"{a}.embedding_length", shape.n_embd, U32, None),
        (f"{a}.feed_forward_length", shape.n_ff, U32, None),
        (f"{a}.attention.head_count", shape.n_head, U32, None),
        (f"{a}.attention.head_count_kv", shape.n_head_kv, U32, None),
        (f"{a}.rope.freq_base", 10000.0, F32, None),
        (f"{a}.attention.layer_norm_rms_epsilon", 1e-5, F32, None),
        (f"{a}.vocab_size", n_vocab, U32, None),
    ]


# Byte offsets of each block's fp16 scale/min fields: the rest of a block may be any bytes, these are set
# small so the tiny model's activations stay finite.
_FP16_FIELDS = {GGMLType.Q4_0: (0,), GGMLType.Q4_1: (0, 2), GGMLType.Q5_0: (0,), GGMLType.Q5_1: (0, 2),
                GGMLType.Q8_0: (0,), GGMLType.Q4_K: (0, 2), GGMLType.Q5_K: (0, 2), GGMLType.Q6_K: (208,)}


def random_blocks(rng: np.random.Generator, wt: GGMLType, n_values: int) -> np.ndarray:
    """Raw bytes of n_values weights of a quantized type: random quants, scales of about 0.005."""
    layout = BLOCK_LAYOUTS[wt]
    blocks = rng.integers(0, 256, (n_values // layout.block_size, layout.type_size), dtype=np.uint8)
    for offset in _FP16_FIELDS[wt]:
        scales = rng.uniform(0.002, 0.008, len(blocks)).astype("<f2")
        blocks[:, offset:offset + 2] = scales.reshape(-1, 1).view(np.uint8)
    return blocks.reshape(-1)


def _tensors(shape: TinyShape, n_vocab: int, seed: int) -> list[tuple[str, GGMLType, list[int], np.ndarray]]:
    """(name, type, GGUF dims, raw bytes) of every tensor; matrices hold small random values."""
    rng = np.random.default_rng(seed)
    d, head_dim = shape.n_embd, shape.n_embd // shape.n_head
    q, kv = shape.n_head * head_dim, shape.n_head_kv * head_dim

    def matrix(name: str, wt: GGMLType, rows: int, cols: int):
        return name, wt, [cols, rows], random_blocks(rng, wt, rows * cols)

    def vector(name: str, size: int, mean: float):
        values = (mean + rng.normal(0.0, 0.05, size=size)).astype(np.float32)
        return name, GGMLType.F32, [size], values.view(np.uint8)

    t = shape.types
    out = [matrix("token_embd.weight", t["token_embd"], n_vocab, d), vector("output_norm.weight", d, 1.0)]
    if not shape.tied:
        out.append(matrix("output.weight", t["output"], n_vocab, d))
    for i in range(shape.n_layer):
        b = f"blk.{i}."
        out += [
            vector(b + "attn_norm.weight", d, 1.0),
            matrix(b + "attn_q.weight", t["matrix"], q, d),
            matrix(b + "attn_k.weight", t["matrix"], kv, d),
            matrix(b + "attn_v.weight", t.get("attn_v", t["matrix"]), kv, d),
            matrix(b + "attn_output.weight", t["matrix"], d, q),
            vector(b + "ffn_norm.weight", d, 1.0),
            matrix(b + "ffn_gate.weight", t["matrix"], shape.n_ff, d),
            matrix(b + "ffn_up.weight", t["matrix"], shape.n_ff, d),
            matrix(b + "ffn_down.weight", t["ffn_down"], d, shape.n_ff),
        ]
        if shape.biases:
            out += [vector(b + "attn_q.bias", q, 0.0), vector(b + "attn_k.bias", kv, 0.0),
                    vector(b + "attn_v.bias", kv, 0.0)]
    return out


def tiny_model(shape: TinyShape, real: Path | None, seed: int = 0) -> bytes:
    """A runnable tiny model of `shape.arch`: the real file's metadata (vocabulary cut) when `real` exists."""
    if real is not None and real.exists():
        with GGUFReader(real) as reader:
            entries = _general(reader.metadata, reader.metadata_types)
            entries += cut_vocabulary(reader.metadata, reader.metadata_types)
    else:
        entries = synthetic_tokenizer()
    n_vocab = len(next(v for k, v, *_ in entries if k == "tokenizer.ggml.tokens"))
    entries = _hyperparameters(shape, n_vocab) + entries
    with tempfile.TemporaryDirectory() as tmp:
        writer = GGUFWriter(Path(tmp) / "tiny.gguf")
        for key, value, vtype, elem in entries:
            writer.add_metadata(key, value, vtype, elem)
        for name, wt, dims, raw in _tensors(shape, n_vocab, seed):
            writer.add_tensor(name, wt, dims, raw)
        return writer.write().read_bytes()


# ---- real headers ----------------------------------------------------------------------------------------


def real_header(real: Path) -> bytes:
    """The real file's header with its vocabulary cut: every non-tokenizer key as it is, the full tensor table
    (names, types, dims and offsets unchanged), cut where the tensor data would start."""
    with GGUFReader(real) as reader:
        types = reader.metadata_types
        entries = [(k, v, *types[k]) for k, v in reader.metadata.items() if not k.startswith("tokenizer.")]
        entries += cut_vocabulary(reader.metadata, types)
        kvs = [encode_string(k, k) + encode_value(vt, el, v, k) for k, v, vt, el in entries]
        infos = [gguf_builders.tensor_info(info.name, list(info.dims), int(info.ggml_type),
                                           info.offset - reader.data_offset)
                 for info in reader.tensors.values()]
        return gguf_builders.assemble(kvs, infos, alignment=reader.alignment)


# ---- the corpus ------------------------------------------------------------------------------------------


def seed_corpus(model_dir: Path = MODEL_DIR) -> dict[str, bytes]:
    """name -> bytes of every seed; the real-model-derived ones only when the models are cached."""
    smollm, qwen = model_dir / SMOLLM_FILE, model_dir / QWEN_FILE
    seeds = {
        "tiny_llama_synthetic": tiny_model(LLAMA_TINY, None, seed=1),
        "builders_small_valid": gguf_builders.small_valid_gguf(),
        "builders_small_valid_align64": gguf_builders.small_valid_gguf(alignment=64),
    }
    if smollm.exists():
        seeds["tiny_llama_from_smollm2"] = tiny_model(LLAMA_TINY, smollm, seed=2)
        seeds["header_smollm2"] = real_header(smollm)
    if qwen.exists():
        seeds["tiny_qwen2_from_qwen2.5"] = tiny_model(QWEN2_TINY, qwen, seed=3)
        seeds["header_qwen2.5"] = real_header(qwen)
    return seeds


def write_corpus(directory: Path, model_dir: Path = MODEL_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in seed_corpus(model_dir).items():
        path = directory / f"seed_{name}.gguf"
        path.write_bytes(data)
        paths.append(path)
    return paths
