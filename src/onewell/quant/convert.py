"""`onewell quantize`: rewrite a GGUF file with its weights in another type, as llama.cpp's
`llama-quantize --allow-requantize IN OUT Q8_0|Q4_0|Q6_K|Q4_K_M|F16|BF16` does (no importance matrix, not `--pure`).

What llama-quantize does, and so do we:
- only tensors whose name ends in "weight", with 2 or more dimensions, are converted; norms, biases and a few
  named small tensors (expert gates, position embeddings, ...) keep their type and bytes;
- for the quantized targets, the output projection (or, with tied embeddings, the token embedding) gets more
  bits: Q8_0 stays Q8_0, the others become Q6_K, Q8_0 when its rows are not a multiple of 256;
- Q4_K_M is a mix (llama.cpp's llama_tensor_get_type for a dense, non-Falcon model): Q4_K by default, Q6_K for
  attn_v and ffn_down in the layers `use_more_bits` picks (the first and last eighth, every third in between),
  Q5_K for a fused attn_qkv;
- a type whose blocks do not fit a tensor's rows falls back as llama.cpp's tensor_type_fallback: Q4_K -> Q5_0,
  Q5_K -> Q5_1, Q6_K -> Q8_0 (then F16 if even 32 does not divide the rows);
- a tensor already in its new type is copied unchanged; any other is dequantized to float32 and re-encoded
  with ggml's reference quantizer;
- every metadata entry is kept, in order, except that general.quantization_version (2) and general.file_type
  are set and moved to the end (gguf's set_val removes and re-appends a key), and split.* keys are dropped.
We keep the input's tensor order (llama-quantize sorts tensors by layer number, then name).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from ..errors import UnsupportedError
from ..gguf import GGUFReader, TensorInfo
from ..gguf.constants import BLOCK_LAYOUTS, FILE_TYPE, GGMLType, ValueType
from ..gguf.writer import GGUFWriter
from . import DEQUANTIZE_TYPES, QUANTIZE_TYPES, dequantize, quantize

# target name -> its default type (llama.cpp's ftype -> default type)
TARGETS: dict[str, GGMLType] = {"q8_0": GGMLType.Q8_0, "q4_0": GGMLType.Q4_0, "q6_k": GGMLType.Q6_K,
                                "q4_k_m": GGMLType.Q4_K, "f16": GGMLType.F16, "bf16": GGMLType.BF16}
FLOAT_TARGETS = frozenset({GGMLType.F16, GGMLType.BF16})
# llama.cpp's tensor_type_fallback for rows that are not whole blocks of the chosen type
_FALLBACK = {GGMLType.Q4_K: GGMLType.Q5_0, GGMLType.Q5_K: GGMLType.Q5_1, GGMLType.Q6_K: GGMLType.Q8_0,
             GGMLType.Q2_K: GGMLType.Q4_0, GGMLType.Q3_K: GGMLType.Q4_0, GGMLType.IQ4_XS: GGMLType.IQ4_NL}

QUANTIZATION_VERSION = 2  # ggml's GGML_QNT_VERSION
_SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")

# Name fragments llama-quantize never converts (small or precision-critical 2-D tensors of some architectures).
_KEEP_FRAGMENTS = (
    "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d.weight", "shortconv.conv.weight", "attn_rel_b.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
    "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
)
_KEEP_NAMES = ("position_embd.weight", "token_types.weight")


@dataclass(frozen=True)
class TensorPlan:
    """What happens to one tensor: its table entry in the source and the type it is written in."""

    info: TensorInfo
    new_type: GGMLType

    @property
    def copied(self) -> bool:
        return self.new_type == self.info.ggml_type


def target_type(target: str) -> GGMLType:
    try:
        return TARGETS[target.lower()]
    except (KeyError, AttributeError):
        raise UnsupportedError(f"unknown quantization target {target!r} (choose from {', '.join(TARGETS)})") from None


def is_converted(info: TensorInfo) -> bool:
    """llama-quantize's test for "this tensor is a weight matrix we may re-encode"."""
    name = info.name
    return (name.endswith("weight") and len(info.dims) >= 2 and name not in _KEEP_NAMES
            and not any(fragment in name for fragment in _KEEP_FRAGMENTS))


def _output_type(info: TensorInfo, default: GGMLType, arch: str) -> GGMLType:
    """The type llama-quantize picks for the output projection (no overrides, no importance matrix)."""
    ne0 = info.dims[0]
    if arch == "falcon" or ne0 % BLOCK_LAYOUTS[default].block_size:
        return GGMLType.Q8_0
    return default if default == GGMLType.Q8_0 else GGMLType.Q6_K


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama.cpp's choice of the layers a K-quant mix gives more bits: first and last eighth, every third between."""
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def _layer(name: str) -> int:
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit() else -1


def _mix_type(name: str, default: GGMLType, target: str, layer_rank: dict[str, dict[int, int]]) -> GGMLType:
    """Q4_K_M's per-tensor rule (llama_tensor_get_type_impl, dense model, no Falcon): attn_v and ffn_down of the
    use_more_bits layers get Q6_K. The layer index counts those tensors in layer order, as llama.cpp's counters."""
    if target != "q4_k_m":
        return default
    if "attn_qkv.weight" in name:
        return GGMLType.Q5_K
    for role in ("attn_v.weight", "ffn_down"):
        if role in name:
            ranks = layer_rank[role]
            if use_more_bits(ranks[_layer(name)], len(ranks)):
                return GGMLType.Q6_K
    return default


def _fallback(info: TensorInfo, new_type: GGMLType) -> GGMLType:
    """llama.cpp's tensor_type_fallback: a type whose blocks do not divide the rows gives way to a 32-block one."""
    ne0 = info.dims[0]
    if ne0 % BLOCK_LAYOUTS[new_type].block_size == 0:
        return new_type
    new_type = _FALLBACK.get(new_type, new_type)
    return new_type if ne0 % BLOCK_LAYOUTS[new_type].block_size == 0 else GGMLType.F16


def plan_conversion(reader: GGUFReader, target: str) -> list[TensorPlan]:
    """The new type of every tensor of `reader`, in file order. Raises UnsupportedError before any work is done
    if a tensor would need a type we cannot decode or encode."""
    default = target_type(target)
    arch = str(reader.metadata.get("general.architecture", ""))
    has_output = "output.weight" in reader.tensors
    layer_rank = {role: {layer: i for i, layer in enumerate(sorted(_layer(n) for n in reader.tensors
                                                                        if role in n and n.endswith(".weight")))}
                  for role in ("attn_v.weight", "ffn_down")}
    plans = []
    for name, info in reader.tensors.items():
        new_type = info.ggml_type
        if is_converted(info):
            new_type = default
            if default not in FLOAT_TARGETS:
                if name == "output.weight" or (not has_output and name == "token_embd.weight"):
                    new_type = _output_type(info, default, arch)
                else:
                    new_type = _mix_type(name, default, target.lower(), layer_rank)
                if new_type != default or default not in (GGMLType.Q8_0, GGMLType.Q4_0):
                    new_type = _fallback(info, new_type)   # Q8_0/Q4_0 weights keep the clear error below
            if info.dims[0] % BLOCK_LAYOUTS[new_type].block_size:
                raise UnsupportedError(f"{reader.path}: tensor {name!r}: rows of {info.dims[0]} values cannot be "
                                       f"stored as {new_type.name} (blocks of {BLOCK_LAYOUTS[new_type].block_size})")
        plan = TensorPlan(info, new_type)
        if not plan.copied:
            _check_codecs(reader, plan)
        plans.append(plan)
    return plans


def _check_codecs(reader: GGUFReader, plan: TensorPlan) -> None:
    name, source = plan.info.name, plan.info.ggml_type
    if source not in DEQUANTIZE_TYPES:
        raise UnsupportedError(f"{reader.path}: tensor {name!r}: cannot read {source.name} data to convert it")
    if plan.new_type not in QUANTIZE_TYPES:
        raise UnsupportedError(f"{reader.path}: tensor {name!r}: llama-quantize would store it as "
                               f"{plan.new_type.name}, which onewell cannot encode yet")


def convert_tensor(reader: GGUFReader, plan: TensorPlan) -> np.ndarray:
    """The bytes of one tensor in its new type (a view of the source when it is copied)."""
    raw = reader.tensor_data(plan.info.name)
    if plan.copied:
        return raw
    values = dequantize(plan.info.ggml_type, raw, plan.info.shape)
    return quantize(plan.new_type, values)


def converted_metadata(reader: GGUFReader, target: str) -> list[tuple[str, object, ValueType, ValueType | None]]:
    """(key, value, type, element type) of the output file, in order."""
    if int(reader.metadata.get("split.count", 1) or 1) > 1:
        raise UnsupportedError(f"{reader.path}: split GGUF files are not supported; merge the parts first")
    moved = ("general.quantization_version", "general.file_type")
    entries = [(key, value, *reader.metadata_types[key]) for key, value in reader.metadata.items()
               if key not in moved and key not in _SPLIT_KEYS]
    entries.append(("general.quantization_version", QUANTIZATION_VERSION, ValueType.UINT32, None))
    entries.append(("general.file_type", FILE_TYPE[target.lower()], ValueType.UINT32, None))
    return entries


def convert_file(src_path: str | os.PathLike, dst_path: str | os.PathLike, target: str,
                 progress: bool = True) -> Path:
    """Write `dst_path`: the model of `src_path` with its weights in `target` (a key of TARGETS).

    Works tensor by tensor (memory: about one float32 copy of the largest tensor); the output appears atomically.
    """
    target_type(target)
    src, dst = Path(src_path), Path(dst_path)
    if dst.exists() and src.resolve() == dst.resolve():
        raise ValueError(f"{dst}: the output must not replace the input file")
    with GGUFReader(src) as reader:
        plans = plan_conversion(reader, target)
        writer = GGUFWriter(dst, alignment=reader.alignment)
        for key, value, vtype, elem in converted_metadata(reader, target):
            writer.add_metadata(key, value, vtype, elem)
        with tqdm(total=len(plans), desc=f"{src.name} → {target.lower()}", unit="tensor",
                  disable=not progress) as bar:
            for plan in plans:
                writer.add_tensor(plan.info.name, plan.new_type, plan.info.dims, _producer(reader, plan, bar))
            return writer.write()


def _producer(reader: GGUFReader, plan: TensorPlan, bar: tqdm) -> Callable[[], np.ndarray]:
    """Deferred conversion: the writer calls it when it reaches this tensor, so only one is in memory at a time."""
    def produce() -> np.ndarray:
        bar.set_postfix_str(f"{plan.info.name} {plan.info.ggml_type.name}→{plan.new_type.name}", refresh=False)
        data = convert_tensor(reader, plan)
        bar.update(1)
        return data
    return produce
