"""Embeddings: token ids of several inputs -> one L2-normalized vector each, from an encoder (config.is_embedding,
e.g. nomic-bert). What llama.cpp's `--embedding --pooling mean` computes: the last layer's hidden states, their
mean over the input's tokens, divided by its Euclidean norm.

Two engines give the hidden states of a batch of sequences:
- `ReferenceEncoder`: numpy float32, one sequence at a time (the oracle);
- `NativeEncoder`: the C executor's encoder step (`_core.executor_encode`). Inputs are packed in order into
  steps of at most max_batch tokens, sequences back to back; each attends to its own tokens only (a
  block-diagonal mask, K and V read from the step's buffers), so every weight is read once per step for all of
  them. An input must fit one step: max_batch = n_ctx = the model's training context (nomic: 2048 tokens).

    embedder = Embedder(spec, tokenizer)            # or backend="reference"
    vectors = embedder.embed(["search_query: ...", "search_document: ..."])   # (2, n_embd) float32
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from onewell.errors import ContextOverflowError, WrongModelKindError
from onewell.models.base import ModelSpec
from onewell.runtime.reference import ACTIVATIONS, apply_rope, causal_attention, dense, gather_rows, rope_angles

MAX_CONTEXT = 2048   # tokens per input (and per native step) when the model's training context is larger


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm with bias over the last axis, float32 (ggml_norm, then the weight and bias)."""
    centered = x - np.mean(x, axis=-1, keepdims=True)
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    return centered / np.sqrt(var + np.float32(eps)) * w + b


def mean_pool_normalize(hidden: np.ndarray) -> np.ndarray:
    """(n_tokens, n_embd) hidden states -> the L2-normalized mean, float32 (a zero vector stays zero)."""
    mean = hidden.astype(np.float64).mean(axis=0)
    norm = np.linalg.norm(mean)
    return (mean / norm if norm > 0 else mean).astype(np.float32)


def _require_encoder(spec: ModelSpec) -> None:
    if not spec.config.is_embedding:
        raise WrongModelKindError(f"{spec.metadata.get('general.name', spec.config.arch)} is a generative model "
                                  f"(arch {spec.config.arch!r}); embeddings need an embedding model such as "
                                  f"nomic-embed-text-v1.5")


def check_inputs(batch: Sequence[Sequence[int]], n_vocab: int, n_ctx: int) -> list[np.ndarray]:
    """Each input as int32 ids: non-empty, in the vocabulary, at most n_ctx long (ValueError naming the input)."""
    if len(batch) == 0:
        raise ValueError("embeddings need at least one input")
    out = []
    for i, ids in enumerate(batch):
        a = np.asarray(ids)
        if a.ndim != 1 or len(a) == 0 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"input {i}: expected a non-empty list of integer token ids")
        bad = (a < 0) | (a >= n_vocab)
        if bad.any():
            raise ValueError(f"input {i}: token id {int(a[bad][0])} is outside the vocabulary [0, {n_vocab})")
        if len(a) > n_ctx:
            raise ContextOverflowError(f"input {i} has {len(a)} tokens, more than the {n_ctx} the model takes")
        out.append(a.astype(np.int32))
    return out


class ReferenceEncoder:
    """The encoder forward pass in numpy float32, one sequence at a time: the readable oracle."""

    def __init__(self, spec: ModelSpec, n_ctx: int):
        _require_encoder(spec)
        self.spec, self.config, self.n_ctx = spec, spec.config, n_ctx
        self.layers = [{role: dense(w) for role, w in layer.tensors.items()} for layer in spec.layers]
        types = spec.tensors.get("token_types")
        self.type_row = dense(types)[0] if types is not None else None
        self.embd_norm = dense(spec.tensors.get("embd_norm"))
        self.embd_norm_b = dense(spec.tensors.get("embd_norm_b"))

    def hidden(self, batch: list[np.ndarray]) -> list[np.ndarray]:
        return [self._sequence(ids.astype(np.int64)) for ids in batch]

    def _sequence(self, ids: np.ndarray) -> np.ndarray:
        cfg, n, hd = self.config, len(ids), self.config.head_dim
        eps = cfg.norm_eps
        x = gather_rows(self.spec.token_embd, ids)
        if self.type_row is not None:
            x = x + self.type_row
        if self.embd_norm is not None:
            x = layer_norm(x, self.embd_norm, self.embd_norm_b, eps)
        angles: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        for layer, spec in zip(self.layers, self.spec.layers):
            if spec.rope_theta not in angles:
                angles[spec.rope_theta] = rope_angles(np.arange(n), cfg.rope_dims, spec.rope_theta)
            cos, sin = angles[spec.rope_theta]
            # attention on the (already normalized) input, then residual and LayerNorm: post-norm
            q = (x @ layer["wq"].T).reshape(n, cfg.n_head, hd)
            k = (x @ layer["wk"].T).reshape(n, cfg.n_head_kv, hd)
            v = (x @ layer["wv"].T).reshape(n, cfg.n_head_kv, hd)
            q, k = apply_rope(q, cos, sin, cfg.rope_style), apply_rope(k, cos, sin, cfg.rope_style)
            attn = causal_attention(q, k, v, 0, scale=cfg.attn_scale or None, causal=False)
            x = layer_norm(x + attn @ layer["wo"].T, layer["attn_out_norm"], layer["attn_out_norm_b"], eps)
            gated = ACTIVATIONS[cfg.activation](x @ layer["w_gate"].T) * (x @ layer["w_up"].T)
            x = layer_norm(x + gated @ layer["w_down"].T, layer["layer_out_norm"], layer["layer_out_norm_b"], eps)
        return x


class NativeEncoder:
    """Encoder steps on the native executor: many inputs per step, each attending to itself only."""

    def __init__(self, spec: ModelSpec, n_ctx: int, threads: int | None = None, isa: str | None = None):
        _require_encoder(spec)
        from onewell._native import _core
        from onewell.runtime.native import physical_cores
        from onewell.runtime.native_kernels import resolve_path
        from onewell.runtime.plan import build_plan

        self._core = _core
        self.spec, self.config, self.n_ctx = spec, spec.config, n_ctx
        self.max_batch = n_ctx   # a sequence must fit one step: its tokens attend to each other
        path = resolve_path(isa) if isa is not None else None
        self.plan = build_plan(spec, repack=False)
        self._ex = _core.executor_create(*self.plan.native_args(), threads or physical_cores(), n_ctx,
                                         self.max_batch)
        if path is not None:
            _core.executor_configure(self._ex, path, 0, -1)

    def info(self) -> dict:
        return self._core.executor_info(self._ex)

    def steps(self, batch: list[np.ndarray]) -> list[list[int]]:
        """Input indices per step: in order, as many as fit max_batch tokens."""
        steps, current, used = [], [], 0
        for i, ids in enumerate(batch):
            if current and used + len(ids) > self.max_batch:
                steps.append(current)
                current, used = [], 0
            current.append(i)
            used += len(ids)
        steps.append(current)
        return steps

    def hidden(self, batch: list[np.ndarray]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for step in self.steps(batch):
            tokens = np.ascontiguousarray(np.concatenate([batch[i] for i in step]), dtype=np.int32)
            lens = np.array([len(batch[i]) for i in step], dtype=np.int32)
            hidden = np.empty((len(tokens), self.config.n_embd), dtype=np.float32)
            self._core.executor_encode(self._ex, tokens, lens, hidden)
            out.extend(np.split(hidden, np.cumsum(lens)[:-1]))
        return out


class Embedder:
    """Texts or token ids -> L2-normalized mean-pooled embeddings, (n_inputs, n_embd) float32."""

    def __init__(self, spec: ModelSpec, tokenizer, backend: str = "native", threads: int | None = None,
                 n_ctx: int | None = None, isa: str | None = None):
        _require_encoder(spec)
        if spec.config.pooling != "mean":
            raise ValueError(f"pooling {spec.config.pooling!r} is not implemented (only mean)")
        self.spec, self.tokenizer = spec, tokenizer
        self.n_ctx = min(n_ctx or MAX_CONTEXT, spec.config.n_ctx_train)
        if backend == "native":
            self.engine = NativeEncoder(spec, self.n_ctx, threads=threads, isa=isa)
        elif backend == "reference":
            self.engine = ReferenceEncoder(spec, self.n_ctx)
        else:
            raise ValueError(f"unknown backend {backend!r}; choose one of native, reference")

    @property
    def dimensions(self) -> int:
        return self.spec.config.n_embd

    def tokenize(self, text: str) -> list[int]:
        """[CLS] text [SEP], special tokens parsed, as llama.cpp's server tokenizes an embedding input."""
        if not isinstance(text, str):
            raise TypeError(f"an input text must be a str, not {type(text).__name__}")
        return self.tokenizer.encode(text, add_bos=True, parse_special=True)

    def embed_ids(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
        inputs = check_inputs(batch, self.spec.config.n_vocab, self.n_ctx)
        return np.stack([mean_pool_normalize(h) for h in self.engine.hidden(inputs)])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            texts = [texts]
        return self.embed_ids([self.tokenize(t) for t in texts])


def truncate_dimensions(vectors: np.ndarray, dimensions: int | None) -> np.ndarray:
    """Matryoshka truncation: the first `dimensions` values of each vector, L2-normalized again."""
    if dimensions is None:
        return vectors
    if isinstance(dimensions, bool) or not isinstance(dimensions, (int, np.integer)) or not \
            1 <= dimensions <= vectors.shape[1]:
        raise ValueError(f"dimensions must be an integer in [1, {vectors.shape[1]}], got {dimensions!r}")
    cut = vectors[:, :dimensions].astype(np.float64)
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    return (cut / np.where(norms > 0, norms, 1.0)).astype(np.float32)
