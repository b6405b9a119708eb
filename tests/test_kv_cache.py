"""The KV cache's element types (f32, f16, q8_0): the native store and attention against their numpy twins
(onewell/runtime/kv_cache.py, ops_reference.attention) on every ISA and kernel path this CPU has, and the executor
against the reference forward that rounds its cache the same way, per type.

Tolerances: the store is bit-exact (f16 rounds to nearest even on both sides; q8_0 is the activation quantizer,
whose numpy twin is bit-exact). Attention over the stored values is float32 in C against float64 in numpy, the
same bounds as tests/test_native_ops.py. The executor bounds are test_native_backend.py's (only summation order
and 8-bit activation roundings differ), which the rounding of the cache does not change: both sides round the same
float32 keys and values. What it does change is which values sit within float32 noise of an 8-bit rounding
boundary, where the executor may pick the other step: such ties are compared with the emulation rounding them
the other way (test_native_backend.errors_up_to_ties; docs/kernels.md, "aarch64 under emulation").
"""
from __future__ import annotations

import numpy as np
import pytest
from test_native_backend import IDS, TINY, errors_up_to_ties, tiny_spec

from onewell._native import _core
from onewell.runtime import kv_cache as K
from onewell.runtime import native_ops as ops
from onewell.runtime import ops_reference as ref
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_kernels import available_paths
from onewell.runtime.native_multi import NativeMultiBackend
from onewell.runtime.reference import ReferenceBackend

RTOL, ATOL = 2e-5, 1e-5
OPS_ISA = ops.KERNEL_PATH_OPS_ISA


@pytest.fixture(params=ops.available_isas())
def isa(request):
    before = ops.ops_isa()
    ops.set_ops_isa(request.param)
    yield request.param
    ops.set_ops_isa(before)


def random_rows(seed: int, *shape: int) -> np.ndarray:
    """Normal values with a spread of magnitudes per block, a zero block and exact rounding ties."""
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape, dtype=np.float32) * r.uniform(0.01, 30, shape[:-1] + (1,)).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    flat[0, :32] = 0.0                                              # amax 0: d = 0, every q = 0
    flat[-1, :4] = np.float32(1 + 2 ** -11)                        # halfway between two f16 values: to even
    return x


# ---- the store -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kv_type", K.KV_TYPES)
@pytest.mark.parametrize("path", available_paths())
@pytest.mark.parametrize("shape", [(3, 2, 64), (5, 1, 128), (1, 4, 32)])
def test_native_store_is_bit_identical_to_the_numpy_twin(isa, kv_type, path, shape):
    x = random_rows(sum(shape), *shape)
    got = ops.kv_store(x, kv_type, path)
    want = K.to_bytes(x, kv_type)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_f16_store_takes_any_head_size(isa):
    x = random_rows(1, 4, 3, 7)
    np.testing.assert_array_equal(ops.kv_store(x, "f16"), x.astype(np.float16))


@pytest.mark.parametrize("kv_type,rel", [("f16", 2 ** -11), ("q8_0", 1 / 254)])
def test_round_trip_error_is_what_the_type_promises(kv_type, rel):
    """f16: half an ulp (2^-11 relative) in the normal range; q8_0: half a step, amax / 254, per block (plus the
    fp16 rounding of d, 2^-11 of it)."""
    x = random_rows(2, 6, 2, 64)
    back = K.round_trip(x, kv_type)
    assert back.shape == x.shape and back.dtype == np.float32
    if kv_type == "f16":
        assert np.all(np.abs(back - x) <= rel * np.abs(x) + 1e-30)
    else:
        blocks, back_blocks = x.reshape(-1, 32), back.reshape(-1, 32)
        amax = np.abs(blocks).max(axis=1, keepdims=True)
        assert np.all(np.abs(back_blocks - blocks) <= amax * (rel + 127 * 2 ** -11) + 1e-30)
        assert np.all(back_blocks[amax[:, 0] == 0] == 0)
    assert not np.array_equal(back, x)      # it does round
    np.testing.assert_array_equal(K.round_trip(x, "f32"), x)


def test_kv_type_errors_name_the_problem():
    with pytest.raises(ValueError, match="kv_type must be one of f32, f16, q8_0"):
        K.check_kv_type("q4_0")
    with pytest.raises(ValueError, match="multiple of 32"):
        K.check_kv_type("q8_0", 48)
    with pytest.raises(ValueError, match="multiple of 32"):
        ops.kv_store(np.zeros((2, 48), np.float32), "q8_0")
    with pytest.raises(ValueError, match="kernel path"):
        ops.kv_store(np.zeros((2, 32), np.float32), "q8_0", "sse9")
    assert K.check_kv_type(None) == "f16" and K.check_kv_type("Q8_0", 64) == "q8_0"
    assert [K.kv_bytes(t, 64) for t in K.KV_TYPES] == [256, 128, 68]


def test_store_binding_refuses_short_buffers_and_bad_sizes():
    x = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match="out"):
        _core.kv_store(2, x, 32, 2, np.zeros(67, np.uint8), "generic")       # 2 rows need 68 bytes
    with pytest.raises(ValueError, match="x"):
        _core.kv_store(1, x, 32, 3, np.zeros(200, np.uint8), "generic")      # 3 rows need 96 floats
    for kv_type, hd, n_rows in [(2, 33, 1), (3, 32, 1), (0, 0, 1), (0, 32, 0), (1, 2**62, 2**62)]:
        with pytest.raises(ValueError):
            _core.kv_store(kv_type, x, hd, n_rows, np.zeros(256, np.uint8), "generic")


# ---- attention over each type ------------------------------------------------------------------------------

ATTN_SHAPES = [  # n_head, n_head_kv, head_dim, n_ctx, cache length
    (14, 2, 64, 37, 40),
    (4, 4, 32, 5, 9),
    (6, 2, 96, 17, 17),     # q8_0: an odd number of blocks per head
    (2, 1, 128, 300, 300),
    (3, 1, 32, 1, 2),
]


@pytest.mark.parametrize("kv_type", K.KV_TYPES)
@pytest.mark.parametrize("shape", ATTN_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("softcap", [0.0, 20.0])
def test_attention_over_stored_rows_matches_the_twin(isa, kv_type, shape, softcap):
    n_head, n_kv, hd, n_ctx, cap = shape
    r = np.random.default_rng(sum(shape))
    q = r.standard_normal((n_head, hd), dtype=np.float32)
    k = random_rows(hd, cap, n_kv, hd)
    v = random_rows(hd + 1, cap, n_kv, hd) * np.float32(0.1)
    ks, vs = ops.kv_store(k, kv_type), ops.kv_store(v, kv_type)
    got = ops.attention(q, ks, vs, n_ctx=n_ctx, softcap=softcap, scale=0.05)
    want = ref.attention(q, K.from_bytes(ks, kv_type)[:n_ctx], K.from_bytes(vs, kv_type)[:n_ctx], 0.05, softcap)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_q8_0_attention_reads_blocks_at_head_and_position_strides(isa):
    """A stride or offset error would read another head's or position's blocks: each kv head and position gets
    a distinct constant, so the output names exactly which rows were read."""
    n_head, n_kv, hd, n_ctx = 4, 2, 64, 3
    v = np.zeros((n_ctx, n_kv, hd), np.float32)
    for t in range(n_ctx):
        for h in range(n_kv):
            v[t, h] = 10 * h + t + 1
    k = np.zeros_like(v)   # equal scores: out = the mean of the positions' values
    got = ops.attention(np.ones((n_head, hd), np.float32), ops.kv_store(k, "q8_0"), ops.kv_store(v, "q8_0"))
    want = np.array([[2.0], [2.0], [12.0], [12.0]]) * np.ones((1, hd))
    np.testing.assert_allclose(got, want, rtol=2e-3)   # q8_0 of a constant row: 127/127 steps, d in fp16


def test_q8_0_attention_same_bits_for_any_thread_count(isa):
    k = ops.kv_store(random_rows(5, 77, 2, 64), "q8_0")
    v = ops.kv_store(random_rows(6, 77, 2, 64), "q8_0")
    q = np.random.default_rng(7).standard_normal((14, 64), dtype=np.float32)
    base = ops.attention(q, k, v)
    for n in (2, 3):
        with ops.ThreadPool(n) as pool:
            np.testing.assert_array_equal(ops.attention(q, k, v, pool=pool), base)


def test_attention_validates_q8_0_shapes():
    q = np.zeros((2, 64), np.float32)
    with pytest.raises(ValueError, match="q8_0"):
        ops.attention(q, np.zeros((4, 1, 64), np.uint8), np.zeros((4, 1, 64), np.uint8))
    with pytest.raises(ValueError, match="q8_0"):
        ops.attention(np.zeros((2, 48), np.float32), np.zeros((4, 1, 51), np.uint8), np.zeros((4, 1, 51), np.uint8))
    with pytest.raises(ValueError, match="bytes"):   # the binding: q8_0 k of 3 positions for n_ctx 4
        _core.attention(None, np.zeros(64, np.float32), q[0], np.zeros(3 * 68, np.uint8), np.zeros(4 * 68, np.uint8),
                        np.zeros(4, np.float32), 4, 1, 1, 64, 1.0, 2)


# ---- the executor, per type --------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny(request):
    style, types = TINY[request.param]
    return tiny_spec(style, types)


@pytest.mark.parametrize("kv_type", K.KV_TYPES)
def test_executor_logits_match_the_emulation_with_the_same_cache_type(isa, tiny, kv_type):
    """test_native_backend's emulation of the executor, its cache rounded as kv_type, per ops ISA (attention
    runs there) and the matching kernel path. The bound is that test's, up to 8-bit roundings the emulation
    itself holds within a few float32 ulps of their boundary (errors_up_to_ties: such a value may round to
    either neighbour; one step there moved the qwen2 q8_0 logits by 3.4e-3 on neon-dotprod and 4.1e-3 on
    avx512, docs/kernels.md); a cache read as the wrong type (f16 bits as f32, blocks misaddressed) lands at
    O(1) of the logit range."""
    paths = [p for p in available_paths() if OPS_ISA[p] == isa] or ["generic"]
    for path in paths:
        backend = NativeBackend(tiny, n_ctx=32, isa=path, kv_type=kv_type)
        info = backend.info()
        assert info["kv_type"] == kv_type and info["ops_isa"] == isa
        err = errors_up_to_ties(backend.forward(IDS, all_logits=True), tiny, IDS, kv_type=kv_type, path=path)
        print(f"\n{tiny.config.arch} {kv_type} {path}: |native - emulated| mean {err.mean():.2e} max {err.max():.2e}")
        assert err.mean() < 3e-5 and err.max() < 1e-3


def test_the_cache_type_changes_the_logits_as_much_as_its_rounding(tiny):
    """f16 moves logits less than q8_0 on average, both more than nothing: the type really reaches the executor.
    Measured over 3 seeds, mean of the logit range: llama f16 6-8e-4, q8_0 1.2-1.3e-3; qwen2 2.1-2.2e-3, 3.2-3.3e-3
    (its maxima are alike, ~1.9e-2: one 8-bit activation step flipped downstream)."""
    runs = {t: NativeBackend(tiny, n_ctx=32, kv_type=t).forward(IDS, all_logits=True) for t in K.KV_TYPES}
    scale = np.abs(runs["f32"]).max()
    d16 = np.abs(runs["f16"] - runs["f32"]).mean() / scale
    d8 = np.abs(runs["q8_0"] - runs["f32"]).mean() / scale
    print(f"\n{tiny.config.arch}: mean |f16 - f32| {d16:.2e}, |q8_0 - f32| {d8:.2e} of the logit range")
    assert 1e-4 < d16 < 0.8 * d8 and d8 < 1e-2


def test_default_is_f16_everywhere(tiny):
    assert NativeBackend(tiny, n_ctx=8).kv_type == "f16"
    assert NativeBackend(tiny, n_ctx=8).info()["kv_type"] == "f16"
    assert ReferenceBackend(tiny, n_ctx=8).kv_type == "f16"
    assert NativeMultiBackend(tiny, n_seq=2, n_ctx=8).info()["kv_type"] == "f16"


def test_info_reports_the_cache_memory(tiny):
    c = tiny.config
    for kv_type, per_value in [("f32", 4), ("f16", 2), ("q8_0", 34 / 32)]:
        info = NativeBackend(tiny, n_ctx=16, kv_type=kv_type).info()
        assert info["kv_bytes_per_token"] == c.n_layer * 2 * c.n_head_kv * c.head_dim * per_value
        assert info["kv_bytes"] == 16 * info["kv_bytes_per_token"]


def test_sequences_of_a_multi_backend_keep_the_type_and_match_one_alone(tiny):
    alone = NativeBackend(tiny, n_ctx=32, threads=2, kv_type="q8_0")
    multi = NativeMultiBackend.from_backend(alone, n_seq=2)
    assert multi.info()["kv_type"] == "q8_0"
    want = alone.forward(IDS, copy=True)
    got = multi.forward_batch([(1, IDS[:5]), (0, IDS)])
    np.testing.assert_array_equal(got[1], want)


def test_backends_refuse_bad_kv_types(tiny):
    with pytest.raises(ValueError, match="kv_type"):
        NativeBackend(tiny, n_ctx=8, kv_type="f8")
    with pytest.raises(ValueError, match="kv_type"):
        ReferenceBackend(tiny, n_ctx=8, kv_type=16)
    with pytest.raises(ValueError, match="kv_type"):
        NativeMultiBackend(tiny, n_seq=2, n_ctx=8, kv_type="")


def test_executor_create_refuses_a_type_the_head_size_cannot_take(tiny):
    from onewell.runtime.plan import build_plan

    args = build_plan(tiny).native_args()
    for bad in (3, -1):
        with pytest.raises(ValueError, match="KV cache type"):
            _core.executor_create(*args, 1, 8, 4, 1, bad)
    ex = _core.executor_create(*args, 1, 8, 4, 1, 2)
    assert _core.executor_info(ex)["kv_type"] == "q8_0"


def test_reference_fork_keeps_the_type(tiny):
    fork = ReferenceBackend(tiny, n_ctx=8, kv_type="q8_0").fork()
    assert fork.kv_type == "q8_0" and fork.n_past == 0


# ---- the API, CLI and server options ------------------------------------------------------------------------

def test_load_takes_the_kv_type_and_checks_it_first(tmp_path):
    import sys
    from pathlib import Path

    import onewell

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fuzz.http_fuzz import tiny_model_file

    with pytest.raises(ValueError, match="kv_type"):
        onewell.load(tmp_path / "not-there.gguf", kv_type="f8")     # before looking for the file
    path = tiny_model_file(tmp_path)
    assert onewell.load(path, threads=1, n_ctx=32).backend.kv_type == "f16"
    for backend in ("native", "reference"):
        model = onewell.load(path, backend=backend, threads=1, n_ctx=32, kv_type="f32")
        assert model.backend.kv_type == "f32"
        assert isinstance(model.generate("hi", max_tokens=2, temperature=0), str)


def test_serve_options_carry_the_kv_type():
    from onewell.serve.app import build_parser
    from onewell.serve.ray_options import RayServeOptions, options_from_args

    args = build_parser().parse_args(["m.gguf", "--kv-type", "q8_0"])
    assert args.kv_type == "q8_0" and options_from_args(args).kv_type == "q8_0"
    assert build_parser().parse_args(["m.gguf"]).kv_type == "f16"
    from onewell.errors import OnewellError
    with pytest.raises(OnewellError, match="kv-type"):
        RayServeOptions(model="m.gguf", kv_type="q4_0")
