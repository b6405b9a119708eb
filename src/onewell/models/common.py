"""What every architecture file needs: hyperparameters from `{arch}.*` metadata, refusal of features we do
not implement, and weights fetched by name with their shapes checked against the config.

An architecture file states what is particular to it (biases, RoPE style); everything a mistake in the
file could break is checked here, once, with a message naming the file, key or tensor.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

from onewell.errors import GGUFError, UnsupportedError
from onewell.models.base import Weight


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


def read_hyperparameters(reader: Any, arch: str) -> Hyperparameters:
    """Read `{arch}.*` keys, check they describe a model we can run, refuse features we do not implement."""
    meta = reader.metadata
    where = f"{reader.path}" if hasattr(reader, "path") else "GGUF file"

    def integer(key: str, default: int | None = None) -> int:
        full = f"{arch}.{key}"
        value = meta.get(full, default)
        if value is None:
            raise GGUFError(f"{where}: metadata key {full!r} is missing")
        try:
            if isinstance(value, bool):
                raise TypeError
            value = operator.index(value)  # int and numpy integers; not floats, strings or arrays
        except TypeError:
            raise GGUFError(f"{where}: metadata key {full!r} must be an integer, got {value!r}") from None
        if value <= 0:
            raise GGUFError(f"{where}: metadata key {full!r} must be positive, got {value}")
        return value

    def real(key: str, default: float | None = None) -> float:
        full = f"{arch}.{key}"
        value = meta.get(full, default)
        if value is None:
            raise GGUFError(f"{where}: metadata key {full!r} is missing")
        if isinstance(value, (bool, str, bytes)):
            raise GGUFError(f"{where}: metadata key {full!r} must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value) or value <= 0:
            raise GGUFError(f"{where}: metadata key {full!r} must be a positive finite number, got {value}")
        return value

    n_embd = integer("embedding_length")
    n_head = integer("attention.head_count")
    n_head_kv = integer("attention.head_count_kv", n_head)  # absent means plain multi-head attention
    if n_head % n_head_kv:
        raise GGUFError(f"{where}: {arch}.attention.head_count ({n_head}) is not a multiple of "
                        f"head_count_kv ({n_head_kv})")
    if f"{arch}.attention.key_length" not in meta and n_embd % n_head:
        raise GGUFError(f"{where}: {arch}.embedding_length ({n_embd}) is not a multiple of "
                        f"attention.head_count ({n_head})")
    head_dim = integer("attention.key_length", n_embd // n_head)
    if head_dim % 2:
        raise GGUFError(f"{where}: head dimension {head_dim} is odd; RoPE rotates pairs")

    hp = Hyperparameters(
        n_embd=n_embd,
        n_layer=integer("block_count"),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=integer("feed_forward_length"),
        n_ctx_train=integer("context_length"),
        rope_theta=real("rope.freq_base", 10000.0),  # llama.cpp's default when the key is absent
        rms_eps=real("attention.layer_norm_rms_epsilon"),
    )
    _refuse_unimplemented(meta, arch, hp, where)
    return hp


def _refuse_unimplemented(meta: dict, arch: str, hp: Hyperparameters, where: str) -> None:
    """Variants that would load fine and then silently compute the wrong thing: refuse them by name."""
    scaling = meta.get(f"{arch}.rope.scaling.type", "none")
    factor = float(meta.get(f"{arch}.rope.scaling.factor", 1.0) or 1.0)
    if scaling not in ("none", "linear") or (scaling == "linear" and factor != 1.0):
        raise UnsupportedError(f"{where}: RoPE scaling {scaling!r} (factor {factor}) is not implemented; "
                               f"only unscaled RoPE is")
    if scaling == "none" and factor != 1.0:
        raise UnsupportedError(f"{where}: {arch}.rope.scaling.factor {factor} is not implemented")
    rope_dims = meta.get(f"{arch}.rope.dimension_count", hp.head_dim)
    if int(rope_dims) != hp.head_dim:
        raise UnsupportedError(f"{where}: partial RoPE ({arch}.rope.dimension_count={rope_dims}, "
                               f"head dimension {hp.head_dim}) is not implemented")
    value_length = meta.get(f"{arch}.attention.value_length", hp.head_dim)
    if int(value_length) != hp.head_dim:
        raise UnsupportedError(f"{where}: value head size {value_length} differs from key head size "
                               f"{hp.head_dim}; not implemented")
    if int(meta.get(f"{arch}.expert_count", 0) or 0) > 0:
        raise UnsupportedError(f"{where}: mixture-of-experts models ({arch}.expert_count) are not implemented")
    for key in ("attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping"):
        if meta.get(f"{arch}.{key}"):
            raise UnsupportedError(f"{where}: {arch}.{key} is not implemented")


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
        return Weight(name=name, ggml_type=info.ggml_type, shape=tuple(info.shape),
                      raw=self._reader.tensor_data(name))

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
    where = f"{reader.path}" if hasattr(reader, "path") else "GGUF file"
    declared = reader.metadata.get(f"{arch}.vocab_size")
    if declared is not None and int(declared) != table_rows:
        raise GGUFError(f"{where}: {arch}.vocab_size is {int(declared)} but token_embd.weight has "
                        f"{table_rows} rows")
    tokens = reader.metadata.get("tokenizer.ggml.tokens")
    if tokens is not None and len(tokens) > table_rows:
        # A token id past the table would index out of bounds; fewer tokens than rows is padding.
        raise GGUFError(f"{where}: the tokenizer has {len(tokens)} tokens but token_embd.weight only "
                        f"{table_rows} rows")
    return table_rows
