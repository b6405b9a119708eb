"""Rows of the real models' weight matrices, for kernel tests on real data (the models are pulled by the fixtures)."""
from __future__ import annotations

import numpy as np

from onewell.gguf.constants import GGMLType


def real_rows(path, wt: GGMLType, per_tensor: int = 40) -> list[tuple[str, int, np.ndarray]]:
    """(name, cols, raw rows) of every 2-D matrix of type wt in a GGUF file: its first and last rows"""
    from onewell.gguf.reader import GGUFReader

    out = []
    with GGUFReader(path) as reader:
        for name, info in reader.tensors.items():
            if len(info.shape) == 2 and info.ggml_type == wt:
                rows, cols = info.shape
                data = reader.tensor_data(name).reshape(rows, -1)
                out.append((name, cols, np.concatenate([data[:per_tensor // 2], data[-per_tensor // 2:]]).reshape(-1)))
    return out
