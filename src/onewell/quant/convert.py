"""`onewell quantize`: rewrite a GGUF file with its weights in another type, as llama.cpp's
`llama-quantize --allow-requantize IN OUT Q8_0|Q4_0|F16` does (no importance matrix, not `--pure`).

What llama-quantize does, and so do we:
- only tensors whose name ends in "weight", with 2 or more dimensions, are converted; norms, biases and a few
  named small tensors (expert gates, position embeddings, ...) keep their type and bytes;
- for the quantized targets, the output projection (or, with tied embeddings, the token embedding) gets more
  bits: Q8_0 stays Q8_0, Q4_0 becomes Q6_K, falling back to Q8_0 when its rows are not a multiple of 256;
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

TARGETS: dict[str, GGMLType] = {"q8_0": GGMLType.Q8_0, "q4_0": GGMLType.Q4_0, "f16": GGMLType.F16}

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
        new_type = GGMLType.Q8_0
    elif default != GGMLType.Q8_0:
        new_type = GGMLType.Q6_K
    else:
        new_type = default
    if new_type == GGMLType.Q6_K and ne0 % BLOCK_LAYOUTS[GGMLType.Q6_K].block_size:
        new_type = GGMLType.Q8_0  # llama.cpp's fallback for rows that are not whole super-blocks
    return new_type


def plan_conversion(reader: GGUFReader, target: str) -> list[TensorPlan]:
    """The new type of every tensor of `reader`, in file order. Raises UnsupportedError before any work is done
    if a tensor would need a type we cannot decode or encode."""
    default = target_type(target)
    arch = str(reader.metadata.get("general.architecture", ""))
    has_output = "output.weight" in reader.tensors
    plans = []
    for name, info in reader.tensors.items():
        new_type = info.ggml_type
        if is_converted(info):
            new_type = default
            if default != GGMLType.F16 and (name == "output.weight" or (not has_output and name == "token_embd.weight")):
                new_type = _output_type(info, default, arch)
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
    """Write `dst_path`: the model of `src_path` with its weights in `target` ("q8_0", "q4_0" or "f16").

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
