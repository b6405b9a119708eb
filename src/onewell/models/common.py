"""What every architecture file needs: hyperparameters from `{arch}.*` metadata, refusal of features we do
not implement, and weights fetched by name with their shapes checked against the config.

An architecture file states what is particular to it (biases, RoPE style); everything a mistake in the
file could break is checked here, once, with a message naming the file, key or tensor.
"""
from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from onewell.errors import GGUFError, UnsupportedError
from onewell.models.base import LAYER_REQUIRED, LayerSpec, ModelConfig, ModelSpec, Weight
from onewell.quant import dequantize


@dataclass(frozen=True)
class Hyperparameters:
    """The numbers every decoder-only transformer here is described by."""

    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx_train: int
    rope_theta: float
    rms_eps: float


class _Metadata:
    """Typed reads of `{arch}.*` keys: a missing or mistyped value is a GGUFError naming the key."""

    def __init__(self, reader: Any, arch: str):
        self.meta, self.arch = reader.metadata, arch
        self.where = f"{reader.path}" if hasattr(reader, "path") else "GGUF file"

    def has(self, key: str) -> bool:
        return f"{self.arch}.{key}" in self.meta

    def _value(self, key: str, default: Any) -> Any:
        value = self.meta.get(f"{self.arch}.{key}", default)
        if value is None:
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' is missing")
        return value

    def integer(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self._value(key, default)
        try:
            if isinstance(value, bool):
                raise TypeError
            value = operator.index(value)  # int and numpy integers; not floats, strings or arrays
        except TypeError:
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' must be an integer, "
                            f"got {value!r}") from None
        if value < minimum:
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' must be >= {minimum}, got {value}")
        return value

    def real(self, key: str, default: float | None = None, maximum: float = math.inf) -> float:
        value = self._value(key, default)
        if isinstance(value, (bool, str, bytes)) or not isinstance(value, (int, float, np.number)):
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value) or value <= 0:
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' must be a positive finite "
                            f"number, got {value}")
        if value > maximum:
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' must be at most {maximum:g}, got {value}")
        return value

    def text(self, key: str, default: str) -> str:
        value = self._value(key, default)
        if not isinstance(value, str):
            raise GGUFError(f"{self.where}: metadata key '{self.arch}.{key}' must be a string, got {value!r}")
        return value


def metadata(reader: Any, arch: str) -> _Metadata:
    """Typed reads of `{arch}.*` keys, for what an architecture file reads beyond the shared hyperparameters."""
    return _Metadata(reader, arch)


# Metadata keys that switch on a ModelConfig flag: refused unless the architecture file sets that flag.
FLAG_KEYS = {"attn_softcap": "attn_logit_softcapping", "final_logit_softcap": "final_logit_softcapping"}


def read_hyperparameters(reader: Any, arch: str, handled_flags: tuple[str, ...] = ()) -> Hyperparameters:
    """Read `{arch}.*` keys, check they describe a model we can run, refuse features we do not implement.
    handled_flags: ModelConfig flags the architecture file sets from their metadata keys (FLAG_KEYS)."""
    md = _Metadata(reader, arch)
    where = md.where
    n_embd = md.integer("embedding_length")
    n_head = md.integer("attention.head_count")
    n_head_kv = md.integer("attention.head_count_kv", n_head)  # absent means plain multi-head attention
    if n_head % n_head_kv:
        raise GGUFError(f"{where}: {arch}.attention.head_count ({n_head}) is not a multiple of "
                        f"head_count_kv ({n_head_kv})")
    if not md.has("attention.key_length") and n_embd % n_head:
        raise GGUFError(f"{where}: {arch}.embedding_length ({n_embd}) is not a multiple of "
                        f"attention.head_count ({n_head})")
    head_dim = md.integer("attention.key_length", n_embd // n_head)
    if head_dim % 2:
        raise GGUFError(f"{where}: head dimension {head_dim} is odd; RoPE rotates pairs")

    hp = Hyperparameters(
        n_embd=n_embd,
        n_layer=md.integer("block_count"),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=md.integer("feed_forward_length"),
        n_ctx_train=md.integer("context_length"),
        # llama.cpp's default when the key is absent; bounds as the executor's (an epsilon above 1 is no epsilon)
        rope_theta=md.real("rope.freq_base", 10000.0, maximum=1e30),
        rms_eps=md.real("attention.layer_norm_rms_epsilon", maximum=1.0),
    )
    _refuse_unimplemented(md, hp, handled_flags)
    return hp


def _refuse_unimplemented(md: _Metadata, hp: Hyperparameters, handled_flags: tuple[str, ...]) -> None:
    """Variants that would load fine and then silently compute the wrong thing: refuse them by name."""
    where, arch = md.where, md.arch
    scaling = md.text("rope.scaling.type", "none")
    # A factor of 0 means "unset" to llama.cpp, like an absent key.
    factor = md.real("rope.scaling.factor", 1.0) if md.meta.get(f"{arch}.rope.scaling.factor") else 1.0
    if scaling not in ("none", "linear") or factor != 1.0:  # linear with factor 1 is no scaling at all
        raise UnsupportedError(f"{where}: RoPE scaling {scaling!r} (factor {factor}) is not implemented; "
                               f"only unscaled RoPE is")
    rope_dims = md.integer("rope.dimension_count", hp.head_dim)
    if rope_dims != hp.head_dim:
        raise UnsupportedError(f"{where}: partial RoPE ({arch}.rope.dimension_count={rope_dims}, "
                               f"head dimension {hp.head_dim}) is not implemented")
    value_length = md.integer("attention.value_length", hp.head_dim)
    if value_length != hp.head_dim:
        raise UnsupportedError(f"{where}: value head size {value_length} differs from key head size "
                               f"{hp.head_dim}; not implemented")
    if md.integer("expert_count", 0, minimum=0) > 0:
        raise UnsupportedError(f"{where}: mixture-of-experts models ({arch}.expert_count) are not implemented")
    for flag, key in FLAG_KEYS.items():
        if flag not in handled_flags and md.meta.get(f"{arch}.{key}"):
            raise UnsupportedError(f"{where}: {arch}.{key} is not implemented for architecture {arch!r}")


class WeightTable:
    """Hands out weights by GGUF tensor name, checking each shape; remembers which tensors were taken
    so `check_all_used` can refuse files carrying tensors this architecture file does not know."""

    def __init__(self, reader: Any):
        self._reader = reader
        self._where = f"{reader.path}" if hasattr(reader, "path") else "GGUF file"
        self._used: set[str] = set()

    def has(self, name: str) -> bool:
        return name in self._reader.tensors

    def get(self, name: str, shape: tuple[int, ...]) -> Weight:
        info = self._reader.tensors.get(name)
        if info is None:
            raise GGUFError(f"{self._where}: tensor {name!r} is missing")
        if tuple(info.shape) != tuple(shape):
            raise GGUFError(f"{self._where}: tensor {name!r} has shape {tuple(info.shape)} (numpy order), "
                            f"the model's metadata implies {tuple(shape)}")
        self._used.add(name)
        weight = Weight(name=name, ggml_type=info.ggml_type, shape=tuple(info.shape),
                        raw=self._reader.tensor_data(name))
        if len(shape) == 1:
            self._check_finite(weight)
        return weight

    def _check_finite(self, w: Weight) -> None:
        """Norm weights and biases scale every activation: a NaN or inf there poisons every output."""
        values = dequantize(w.ggml_type, w.raw, w.shape)
        if not np.isfinite(values).all():
            raise GGUFError(f"{self._where}: tensor {w.name!r} contains NaN or inf "
                            f"(at element {int(np.flatnonzero(~np.isfinite(values))[0])})")

    def rows(self, name: str, cols: int) -> int:
        """Row count of a 2-D tensor whose columns are known (the vocabulary size of an embedding table)."""
        info = self._reader.tensors.get(name)
        if info is None:
            raise GGUFError(f"{self._where}: tensor {name!r} is missing")
        if len(info.shape) != 2 or info.shape[1] != cols:
            raise GGUFError(f"{self._where}: tensor {name!r} has shape {tuple(info.shape)} (numpy order), "
                            f"expected (n_vocab, {cols})")
        return int(info.shape[0])

    def optional(self, name: str, shape: tuple[int, ...]) -> Weight | None:
        return self.get(name, shape) if self.has(name) else None

    def check_all_used(self, arch: str) -> None:
        unknown = sorted(set(self._reader.tensors) - self._used)
        if unknown:
            shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            raise UnsupportedError(f"{self._where}: tensors not used by the {arch!r} architecture: {shown} "
                                   f"(a variant onewell does not implement)")


def vocab_size(reader: Any, arch: str, table_rows: int) -> int:
    """Rows of the embedding table, checked against the vocabulary the tokenizer and metadata claim."""
    md = _Metadata(reader, arch)
    declared = md.integer("vocab_size", table_rows)
    if declared != table_rows:
        raise GGUFError(f"{md.where}: {arch}.vocab_size is {declared} but token_embd.weight has {table_rows} rows")
    tokens = reader.metadata.get("tokenizer.ggml.tokens")
    if tokens is not None and len(tokens) > table_rows:
        # A token id past the table would index out of bounds; fewer tokens than rows is padding.
        raise GGUFError(f"{md.where}: the tokenizer has {len(tokens)} tokens but token_embd.weight only "
                        f"{table_rows} rows")
    return table_rows


# GGUF tensor name (after "blk.{i}.") and shape of every layer role; shapes from the hyperparameters.
LAYER_TENSOR_NAMES = {
    "attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
    "wo": "attn_output.weight", "ffn_norm": "ffn_norm.weight", "w_gate": "ffn_gate.weight",
    "w_up": "ffn_up.weight", "w_down": "ffn_down.weight",
    "bq": "attn_q.bias", "bk": "attn_k.bias", "bv": "attn_v.bias",
    "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
    "attn_post_norm": "post_attention_norm.weight", "ffn_post_norm": "post_ffw_norm.weight",
}


def layer_shapes(hp: Hyperparameters) -> dict[str, tuple[int, ...]]:
    d, q_dim, kv_dim = hp.n_embd, hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
    return {
        "attn_norm": (d,), "wq": (q_dim, d), "wk": (kv_dim, d), "wv": (kv_dim, d), "wo": (d, q_dim),
        "ffn_norm": (d,), "w_gate": (hp.n_ff, d), "w_up": (hp.n_ff, d), "w_down": (d, hp.n_ff),
        "bq": (q_dim,), "bk": (kv_dim,), "bv": (kv_dim,), "q_norm": (hp.head_dim,), "k_norm": (hp.head_dim,),
        "attn_post_norm": (d,), "ffn_post_norm": (d,),
    }


def split_rows(fused: Weight, parts: dict[str, int]) -> dict[str, Weight]:
    """Row views of a matrix that stacks several (fused QKV, gate+up): rows are contiguous byte runs, so each
    part is a zero-copy slice of the fused tensor's bytes. parts: role -> row count, in stacking order."""
    rows, cols = fused.shape
    if sum(parts.values()) != rows:
        raise ValueError(f"tensor {fused.name!r}: {rows} rows cannot hold {dict(parts)}")
    row_bytes = fused.raw.size // rows
    views, start = {}, 0
    for role, n in parts.items():
        views[role] = Weight(f"{fused.name}[rows {start}:{start + n}]", fused.ggml_type, (n, cols),
                             fused.raw[start * row_bytes:(start + n) * row_bytes])
        start += n
    return views


def _layer_tensors(w: WeightTable, i: int, roles: tuple[str, ...], shapes: dict[str, tuple[int, ...]],
                   fused: dict[str, tuple[str, ...]]) -> dict[str, Weight]:
    tensors: dict[str, Weight] = {}
    for name, parts in fused.items():
        if w.has(f"blk.{i}.{name}"):
            rows = {role: shapes[role][0] for role in parts}
            tensors |= split_rows(w.get(f"blk.{i}.{name}", (sum(rows.values()), shapes[parts[0]][1])), rows)
    for role in roles:
        if role not in tensors:
            tensors[role] = w.get(f"blk.{i}.{LAYER_TENSOR_NAMES[role]}", shapes[role])
    return tensors


def _rope_freqs(w: WeightTable, hp: Hyperparameters) -> Weight | None:
    """rope_freqs.weight (Llama 3.x): [head_dim/2] factors that divide the RoPE frequencies; must be > 0."""
    factors = w.optional("rope_freqs.weight", (hp.head_dim // 2,))
    if factors is not None:
        values = dequantize(factors.ggml_type, factors.raw, factors.shape)
        if not (values > 0).all():
            raise GGUFError(f"tensor 'rope_freqs.weight' has a factor <= 0 ({float(values.min())}); "
                            f"it divides a RoPE frequency")
    return factors


def build_decoder_spec(reader: Any, arch: str, *, rope_style: str, layer_features: tuple[str, ...] = (),
                       layer_attention: Callable[[int], dict] | None = None,
                       model_features: tuple[str, ...] = (), fused: dict[str, tuple[str, ...]] | None = None,
                       **flags: Any) -> ModelSpec:
    """The pre-norm decoder every supported family shares (RMSNorm, GQA, gated FFN, output separate or tied):
    hyperparameters from `{arch}.*` metadata, every weight looked up by its GGUF name with its shape checked.
    layer_features: the optional layer roles (base.LAYER_OPTIONAL) this architecture has in every layer;
    layer_attention: layer index -> {"rope_theta": .., "sliding_window": ..} where layers differ (default: every
    layer global with the metadata's RoPE base);
    model_features: the optional model roles (base.MODEL_OPTIONAL) it reads when the file has them;
    fused: GGUF tensor name (after "blk.{i}.") -> the roles whose rows it stacks, in order; where a layer has
    that tensor, the roles are row views of it (phi3: attn_qkv, and ffn_up holding gate then up);
    flags: ModelConfig feature flags (activation, embd_scale, ...). Tensors the file has beyond these are refused."""
    hp = read_hyperparameters(reader, arch, handled_flags=tuple(flags))
    w = WeightTable(reader)
    d = hp.n_embd
    n_vocab = vocab_size(reader, arch, w.rows("token_embd.weight", d))
    tied = not w.has("output.weight")

    # the config is the metadata's hyperparameters plus what the file's tensors and the architecture decide
    config = ModelConfig(arch=arch, n_vocab=n_vocab, rope_style=rope_style, tie_embeddings=tied, **asdict(hp),
                         **flags)
    shapes = layer_shapes(hp)
    roles = LAYER_REQUIRED + tuple(layer_features)
    attention = layer_attention or (lambda i: {})
    layers = [LayerSpec(_layer_tensors(w, i, roles, shapes, fused or {}), **{"rope_theta": hp.rope_theta, **attention(i)})
              for i in range(hp.n_layer)]
    token_embd = w.get("token_embd.weight", (n_vocab, d))
    unknown = set(model_features) - {"rope_freqs"}
    if unknown:
        raise ValueError(f"{arch}: unknown model features {sorted(unknown)}")
    spec = ModelSpec(
        config=config,
        tensors={"token_embd": token_embd, "output_norm": w.get("output_norm.weight", (d,)),
                 "output": token_embd if tied else w.get("output.weight", (n_vocab, d)),
                 "rope_freqs": _rope_freqs(w, hp) if "rope_freqs" in model_features else None},
        layers=layers,
        metadata=reader.metadata,
    )
    w.check_all_used(arch)  # a tensor we would ignore (e.g. rope_freqs.weight where the family has none) is refused
    return spec
