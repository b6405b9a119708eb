"""The F16 x F16 multi-vector tile (kernels/tile_f16_bf16_avx2.c), which prefill and encoder steps run: bit-identical
to the single-vector AVX2 dot for every (row, vector), for row counts that are not a multiple of the 4-row tile,
vector counts around its 3-vector block, column counts with a scalar tail and across its 512-column spans (one
span and a piece, several, a partial last one); and close to the float product."""
import numpy as np
import pytest

from onewell.gguf.constants import GGMLType
from onewell.runtime.native_kernels import available_paths, matmul

PATHS = [p for p in ("avx2", "avx2-vnni", "avx512") if p in available_paths()]   # avx512 runs this tile too


def f16_matrix(seed: int, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float16)
    return w, np.frombuffer(w.tobytes(), np.uint8).copy()


@pytest.mark.skipif(not PATHS, reason="no AVX2 on this CPU")
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("rows, cols, n_vec", [(4, 64, 3), (7, 72, 2), (9, 777, 7), (1, 8, 4), (13, 3072, 5),
                                               (6, 5, 3), (5, 4864 + 13, 4), (3, 544, 3)])
def test_tile_equals_the_dot_vector_by_vector(path, rows, cols, n_vec):
    w, raw = f16_matrix(rows * cols, rows, cols)
    x = np.random.default_rng(n_vec).standard_normal((n_vec, cols)).astype(np.float32)
    together = matmul(raw, GGMLType.F16, rows, cols, x, isa=path)
    alone = np.stack([matmul(raw, GGMLType.F16, rows, cols, x[v:v + 1], isa=path)[0] for v in range(n_vec)])
    assert np.array_equal(together, alone)
    exact = x.astype(np.float16).astype(np.float64) @ w.astype(np.float64).T   # activations round to f16
    bound = 1e-5 * (np.abs(x.astype(np.float16).astype(np.float64)) @ np.abs(w.astype(np.float64)).T) + 1e-6
    assert (np.abs(together - exact) <= bound).all()
