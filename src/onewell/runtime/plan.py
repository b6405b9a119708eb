"""What the native executor is handed: a model as named, fully validated buffers and shapes.

C trusts this description (it rechecks only what keeps memory safe), so every rule lives here with a message
that names the tensor: shapes against the config, weight types the kernels support, raw sizes, dtypes.
Matrices are zero-copy views of the GGUF mapping; the small vectors (norms, biases) become float32 copies.
With repack=True, Q8_0, Q5_0 and Q4_1 matrices (every one but the embedding table the token gather reads) are
converted once, losslessly, to onewell's R16 layouts (Q8_0 R16, Q4_1 R16: onewell.quant.repack), 64-byte aligned
copies the plan owns; repack={"q8_0_r8", ...} sends Q8_0 to Q8_0 R8 instead (onewell.quant.repack_r8).

What crosses to C (bind_executor.c joins each name to its struct member through one table):
    config  = {"n_vocab": .., "n_embd": .., ..., "rope_style": 0 | 1, feature flags: "n_rot", "activation",
               "embd_scale", "attn_scale", "attn_softcap", "final_softcap" (0 = off)}
    tensors = {"token_embd": matrix, "output": matrix, "output_norm": vector, "rope_freqs": vector?}
    layers  = [{"wq": matrix, ..., "attn_norm": vector, ..., "q_norm": vector?, ..., "rope_theta": float,
                "sliding_window": int}] (absent optional roles: off)
a matrix is (buffer, type, rows, cols, row_bytes), a vector a float32 array. Every feature of the model
description (models/base.py) has a native implementation; bidirectional attention runs in encoder steps
(`_core.executor_encode`, runtime/embedding.py) of embedding models, whose config also carries "bidirectional"
and "norm_eps" and whose tensors "embd_type_row", "embd_norm(_b)" and per layer "attn_out_norm(_b)",
"layer_out_norm(_b)" (post-norm LayerNorms).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

import numpy as np

from onewell.errors import ContextOverflowError, UnsupportedError
from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType, row_nbytes
from onewell.models.base import ModelConfig, ModelSpec, Weight
from onewell.quant import dequantize
from onewell.runtime.native_types import layout_sources, repack_layouts, type_traits, weight_types

ROPE_STYLES = {"normal": 0, "neox": 1}
ACTIVATIONS = {"silu": 0, "gelu_tanh": 1}   # ow_activation (executor.h)
# native config name -> ModelConfig field of the float feature flags (0 = off; checked >= 0)
CONFIG_FLOATS = {"embd_scale": "embd_scale", "attn_scale": "attn_scale", "attn_softcap": "attn_softcap",
                 "final_softcap": "final_logit_softcap"}
MAX_WINDOW = 2**31 - 1
MAX_TOKEN_ID = 2**31 - 1  # token ids travel as int32
CONFIG_INTS = ("n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff")


@dataclass(frozen=True)
class MatrixPlan:
    name: str
    ggml_type: GGMLType   # the type in the file
    rows: int
    cols: int
    row_bytes: int
    raw: np.ndarray  # uint8, C-contiguous, rows * row_bytes bytes
    repacked: bool = False  # raw is a copy in a load-time layout made at load (row_bytes = its stride)
    layout: int = 0         # that layout's id; 0: the type's repack_to (its R16 layout)

    @property
    def native_type(self) -> int:
        """The type id the kernels see: the ggml type, or its load-time layout (Q8_0_R16, Q4_1_R16, Q8_0_R8) for a
        repacked copy."""
        if not self.repacked:
            return int(self.ggml_type)
        return self.layout or repack_layouts()[self.ggml_type]

    def native(self) -> tuple:
        return (self.raw, self.native_type, self.rows, self.cols, self.row_bytes)


Tensor = MatrixPlan | np.ndarray   # a matrix, or a float32 vector


def _native(t: Tensor) -> tuple | np.ndarray:
    return t.native() if isinstance(t, MatrixPlan) else t


@dataclass(frozen=True)
class LayerPlan:
    tensors: dict[str, Tensor]
    rope_theta: float
    sliding_window: int = 0


@dataclass(frozen=True)
class ExecutorPlan:
    config: ModelConfig
    tensors: dict[str, Tensor]
    layers: tuple[LayerPlan, ...]

    def native_config(self) -> dict:
        c = self.config
        return {**{name: int(getattr(c, name)) for name in CONFIG_INTS}, "rms_eps": float(c.rms_eps),
                "rope_style": ROPE_STYLES[c.rope_style], "n_rot": int(c.rope_dims),
                "activation": ACTIVATIONS[c.activation],
                **{name: float(getattr(c, field)) for name, field in CONFIG_FLOATS.items()},
                "bidirectional": int(not c.causal), "norm_eps": float(c.norm_eps)}

    def native_args(self) -> tuple:
        """(config, tensors, layers): the first three arguments of _core.executor_create."""
        tensors = {name: _native(t) for name, t in self.tensors.items()}
        layers = [{**{name: _native(t) for name, t in layer.tensors.items()}, "rope_theta": float(layer.rope_theta),
                   "sliding_window": int(layer.sliding_window)} for layer in self.layers]
        return self.native_config(), tensors, layers

    @property
    def matrices(self) -> list[MatrixPlan]:
        every = list(self.tensors.values()) + [t for layer in self.layers for t in layer.tensors.values()]
        return [t for t in every if isinstance(t, MatrixPlan)]

    @property
    def weight_bytes(self) -> int:
        """Bytes of the distinct matrix buffers handed to the executor (a tied table counted once, unless its
        output projection got a repacked copy)."""
        seen = {_buffer_key(m.raw): m.raw.nbytes for m in self.matrices}
        return sum(seen.values())

    @property
    def repacked(self) -> dict:
        """The load-time R16 copies: {"matrices": how many, "bytes": their size (anonymous memory on top of
        the file mapping, whose pages of those tensors are no longer read), "source_bytes": the size of the
        originals they replace (so bytes - source_bytes is the growth of what a token streams)}."""
        copies = {_buffer_key(m.raw): m for m in self.matrices if m.repacked}
        return {"matrices": len(copies), "bytes": sum(m.raw.nbytes for m in copies.values()),
                "source_bytes": sum(m.rows * row_nbytes(m.ggml_type, m.cols) for m in copies.values())}


def tensor_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The shape of every role the executor takes, model-level and per layer, from the config."""
    q_rows, kv_rows = cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim
    return {
        "token_embd": (cfg.n_vocab, cfg.n_embd), "output": (cfg.n_vocab, cfg.n_embd), "output_norm": (cfg.n_embd,),
        "wq": (q_rows, cfg.n_embd), "wk": (kv_rows, cfg.n_embd), "wv": (kv_rows, cfg.n_embd),
        "wo": (cfg.n_embd, q_rows), "w_gate": (cfg.n_ff, cfg.n_embd), "w_up": (cfg.n_ff, cfg.n_embd),
        "w_down": (cfg.n_embd, cfg.n_ff), "attn_norm": (cfg.n_embd,), "ffn_norm": (cfg.n_embd,),
        "bq": (q_rows,), "bk": (kv_rows,), "bv": (kv_rows,), "q_norm": (cfg.head_dim,), "k_norm": (cfg.head_dim,),
        "attn_post_norm": (cfg.n_embd,), "ffn_post_norm": (cfg.n_embd,), "rope_freqs": (cfg.rope_dims // 2,),
        # encoders: embedding LayerNorm, post-norm LayerNorms (weight, bias)
        "embd_norm": (cfg.n_embd,), "embd_norm_b": (cfg.n_embd,),
        "attn_out_norm": (cfg.n_embd,), "attn_out_norm_b": (cfg.n_embd,),
        "layer_out_norm": (cfg.n_embd,), "layer_out_norm_b": (cfg.n_embd,),
    }


def _tensor(w: Weight, shape: tuple[int, ...]) -> Tensor:
    return _matrix(w, shape) if len(shape) == 2 else _vector(w, shape[0])


def build_plan(spec: ModelSpec, repack: bool | Iterable[GGMLType] = False) -> ExecutorPlan:
    """Check everything the executor relies on and name every buffer; UnsupportedError names the tensor and
    type a native kernel is missing for (or a feature the executor lacks), ValueError any other inconsistency.
    repack: convert the Q8_0 / Q5_0 / Q4_1 matrices (True), or those of the given types, except the embedding
    table of the token gather, to their R16 layout (a tied output projection gets its own copy)."""
    repack_types = repack_type_set(repack)
    cfg = spec.config
    _check_config(cfg)
    shapes = tensor_shapes(cfg)
    if len(spec.layers) != cfg.n_layer:
        raise ValueError(f"the spec has {len(spec.layers)} layers, its config says {cfg.n_layer}")

    tensors = {role: _tensor(w, shapes[role]) for role, w in spec.tensors.items() if role in shapes}
    if "token_types" in spec.tensors:   # BERT: every token is type 0, so only row 0 is added to the embeddings
        tensors["embd_type_row"] = _type_row(spec.tensors["token_types"], cfg.n_embd)
    layers = []
    for index, layer in enumerate(spec.layers):
        unknown = sorted(set(layer.tensors) - set(shapes))
        if unknown:
            raise UnsupportedError(f"layer {index}: the native executor does not implement {unknown}")
        biases = [layer.get(role) is not None for role in ("bq", "bk", "bv")]
        if any(biases) and not all(biases):
            raise UnsupportedError(f"layer {index}: q/k/v biases must be all present or all absent, got "
                                   f"{dict(zip(('bq', 'bk', 'bv'), biases))}")
        _check_positive_float(f"layer {index} rope_theta", layer.rope_theta)
        window = layer.sliding_window
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or not 0 <= window <= MAX_WINDOW:
            raise ValueError(f"layer {index} sliding_window must be an integer in [0, {MAX_WINDOW}], got {window!r}")
        layers.append(LayerPlan({role: _tensor(w, shapes[role]) for role, w in layer.tensors.items()},
                                float(layer.rope_theta), int(window)))
    unknown = sorted(set(spec.tensors) - set(shapes) - {"token_types"})
    if unknown:
        raise UnsupportedError(f"the native executor does not implement {unknown}")
    plan = ExecutorPlan(cfg, tensors, tuple(layers))
    if repack_types:
        copies: dict[tuple, MatrixPlan] = {}   # one copy per distinct buffer

        def packed(role: str, t: Tensor) -> Tensor:
            wanted = isinstance(t, MatrixPlan) and role != "token_embd" and t.ggml_type in repack_types
            return _repacked(t, copies, repack_types[t.ggml_type]) if wanted else t

        plan = ExecutorPlan(cfg, {role: packed(role, t) for role, t in tensors.items()},
                            tuple(dataclasses.replace(lp, tensors={r: packed(r, t) for r, t in lp.tensors.items()})
                                  for lp in layers))
    return plan


def repack_type_set(repack: bool | Iterable[GGMLType | str] | Mapping[GGMLType, int]) -> Mapping[GGMLType, int]:
    """The weight types a `repack` argument asks to convert, each with the layout it goes to: True = every type
    with an R16 layout, to it; False = none; else the names given: a weight type (GGMLType or a name like "q8_0")
    goes to its R16 layout, a layout built on request ("q8_0_r8") takes the type it is built from (Q8_0 R8 then
    wins over Q8_0's R16). A mapping this function returned is checked and returned as it is."""
    layouts = repack_layouts()
    if isinstance(repack, bool):
        return MappingProxyType(dict(layouts) if repack else {})
    if isinstance(repack, Mapping):
        for t, layout in repack.items():
            if layouts.get(t) != layout and layout_sources().get(layout) != t:
                raise ValueError(f"repack: {t!r} has no layout {layout!r}")
        return MappingProxyType(dict(repack))
    if isinstance(repack, (str, bytes)) or not isinstance(repack, Iterable):
        raise ValueError(f"repack must be True, False or a collection of weight types, got {repack!r}")
    by_name = {type_traits()[layout].name: (source, layout) for layout, source in layout_sources().items()}
    chosen: dict[GGMLType, int] = {}
    requested: dict[GGMLType, int] = {}
    for t in repack:
        if isinstance(t, str) and t.lower() in by_name:
            source, layout = by_name[t.lower()]
            requested[source] = layout
            continue
        try:
            gt = GGMLType[t.upper()] if isinstance(t, str) else GGMLType(t)
        except (KeyError, ValueError):
            raise ValueError(f"repack: {t!r} is not a weight type or a layout") from None
        if gt not in layouts:
            raise ValueError(f"repack: {gt.name} has no repacked layout (those that do: "
                             f"{', '.join(sorted([x.name for x in layouts] + list(by_name)))})")
        chosen[gt] = layouts[gt]
    chosen.update(requested)
    return MappingProxyType(chosen)


def _buffer_key(raw: np.ndarray) -> tuple[int, int]:
    """Identifies the memory behind a matrix (views of one tensor made separately are different objects)."""
    return raw.__array_interface__["data"][0], raw.nbytes


def _repacked(m: MatrixPlan, copies: dict[tuple, MatrixPlan], layout: int) -> MatrixPlan:
    key = (*_buffer_key(m.raw), layout)
    if key not in copies:
        from onewell.runtime.native_repack import repack   # the native core, only when asked for

        packed = repack(m.raw, m.ggml_type, m.rows, m.cols, layout=layout)
        copies[key] = MatrixPlan(m.name, m.ggml_type, m.rows, m.cols, packed.shape[1], packed.reshape(-1), True,
                                 layout)
    return dataclasses.replace(copies[key], name=m.name)


def _type_row(w: Weight, n_embd: int) -> np.ndarray:
    """Row 0 of a (n_types, n_embd) token-type table as a float32 vector."""
    if len(w.shape) != 2 or w.shape[1] != n_embd or w.shape[0] < 1:
        raise ValueError(f"tensor {w.name!r} has shape {tuple(w.shape)}, expected (n_types, {n_embd})")
    row = np.ascontiguousarray(dequantize(w.ggml_type, w.raw, w.shape)[0], dtype=np.float32)
    if not np.isfinite(row).all():
        raise ValueError(f"tensor {w.name!r} contains NaN or inf")
    return row


def _check_positive_float(name: str, value) -> None:
    value = float(value)
    if not np.isfinite(value) or value <= 0 or not np.isfinite(np.float32(value)) or np.float32(value) == 0:
        raise ValueError(f"{name} must be a positive float32 value, got {value!r}")


def _check_config(cfg: ModelConfig) -> None:
    for name in CONFIG_INTS:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"config.{name} must be a positive integer, got {value!r}")
    if cfg.n_vocab > MAX_TOKEN_ID:
        raise UnsupportedError(f"vocabulary of {cfg.n_vocab} tokens does not fit int32 ids")
    if cfg.n_head % cfg.n_head_kv:
        raise ValueError(f"n_head {cfg.n_head} is not a multiple of n_head_kv {cfg.n_head_kv}")
    if cfg.head_dim % 2:
        raise ValueError(f"head_dim {cfg.head_dim} is odd; RoPE rotates pairs")
    if cfg.rope_style not in ROPE_STYLES:
        raise UnsupportedError(f"RoPE style {cfg.rope_style!r} (supported: {', '.join(ROPE_STYLES)})")
    _check_positive_float("config.rms_eps", cfg.rms_eps)
    if cfg.activation not in ACTIVATIONS:
        raise UnsupportedError(f"the native executor does not implement the activation {cfg.activation!r} "
                               f"(supported: {', '.join(ACTIVATIONS)})")
    if cfg.causal == cfg.is_embedding:
        raise UnsupportedError("the native executor runs bidirectional attention for embedding models (encoders) "
                               "only, and embedding models only with it; use backend='reference'")
    if cfg.is_embedding:
        _check_positive_float("config.norm_eps", cfg.norm_eps)
    n_rot = cfg.n_rot
    if isinstance(n_rot, bool) or not isinstance(n_rot, (int, np.integer)) or not 0 <= n_rot <= cfg.head_dim \
            or n_rot % 2:
        raise ValueError(f"config.n_rot must be an even integer in [0, head_dim={cfg.head_dim}], got {n_rot!r}")
    for name in CONFIG_FLOATS.values():
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
                or not np.isfinite(value) or value < 0 or not np.isfinite(np.float32(value)):
            raise ValueError(f"config.{name} must be a finite number >= 0 (0 = off), got {value!r}")
    if not cfg.embd_scale > 0:
        raise ValueError(f"config.embd_scale must be > 0 (1 = no scaling), got {cfg.embd_scale!r}")


def _matrix(w: Weight, shape: tuple[int, int]) -> MatrixPlan:
    if tuple(w.shape) != shape:
        raise ValueError(f"tensor {w.name!r} has shape {tuple(w.shape)}, the config implies {shape}")
    try:
        wt = GGMLType(w.ggml_type)
    except ValueError:
        raise UnsupportedError(f"tensor {w.name!r} has unknown type id {w.ggml_type!r}") from None
    if wt not in weight_types():   # the native type-traits table: matmul kernel + row dequantizer
        raise UnsupportedError(f"tensor {w.name!r} is {wt.name}, which has no native kernel (supported: "
                               f"{', '.join(sorted(t.name for t in weight_types()))}); "
                               f"use backend='reference' or requantize the model")
    rows, cols = shape
    layout = BLOCK_LAYOUTS[wt]
    if cols % layout.block_size:
        raise UnsupportedError(f"tensor {w.name!r}: {cols} columns are not a whole number of {wt.name} blocks "
                               f"of {layout.block_size}")
    row_bytes = cols // layout.block_size * layout.type_size
    raw = w.raw
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8:
        raise ValueError(f"tensor {w.name!r}: raw data must be a uint8 numpy array, got "
                         f"{type(raw).__name__} {getattr(raw, 'dtype', '')}")
    if not raw.flags.c_contiguous:
        raise ValueError(f"tensor {w.name!r}: raw data must be C-contiguous")
    if raw.size != rows * row_bytes:
        raise ValueError(f"tensor {w.name!r}: {wt.name} {rows} x {cols} takes {rows * row_bytes} bytes, "
                         f"the data has {raw.size}")
    return MatrixPlan(w.name, wt, rows, cols, row_bytes, raw.reshape(-1))


def _vector(w: Weight | None, size: int) -> np.ndarray | None:
    if w is None:
        return None
    if tuple(w.shape) != (size,):
        raise ValueError(f"tensor {w.name!r} has shape {tuple(w.shape)}, the config implies ({size},)")
    values = np.ascontiguousarray(dequantize(w.ggml_type, w.raw, w.shape), dtype=np.float32)
    if not np.isfinite(values).all():
        raise ValueError(f"tensor {w.name!r} contains NaN or inf")
    return values


# ---- per step ----------------------------------------------------------------------------------------------


def check_tokens(tokens: Sequence[int], n_vocab: int) -> np.ndarray:
    """Token ids as a C-contiguous int32 array; ValueError for an empty, non-integer or out-of-vocabulary input."""
    ids = np.asarray(tokens)
    if ids.ndim != 1 or len(ids) == 0:
        raise ValueError(f"forward needs a non-empty 1-D sequence of token ids, got shape {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"token ids must be integers, got dtype {ids.dtype}")
    bad = (ids < 0) | (ids >= n_vocab)
    if bad.any():
        raise ValueError(f"token id {int(ids[bad][0])} is outside the vocabulary [0, {n_vocab})")
    return np.ascontiguousarray(ids, dtype=np.int32)


def check_room(n_past: int, n_new: int, n_ctx: int) -> None:
    if n_past + n_new > n_ctx:
        raise ContextOverflowError(f"context overflow: {n_past} tokens cached + {n_new} new = {n_past + n_new} "
                                   f"> n_ctx {n_ctx}")
