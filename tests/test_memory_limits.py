"""Settings that would exhaust memory are refused before anything is allocated (runtime/memory.py)."""
import time

import pytest

from onewell.runtime.memory import ResourceLimitError, check_kv_cache_fits, kv_cache_bytes
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_multi import NativeMultiBackend
from test_models import load_spec, tiny_reader


@pytest.fixture(scope="module")
def tiny():
    return load_spec(tiny_reader())


def test_kv_cache_bytes_counts_k_and_v_of_every_layer_position_and_sequence(tiny):
    c = tiny.config
    values = c.n_layer * 2 * c.n_head_kv * c.head_dim
    assert kv_cache_bytes(c, 1, kv_type="f32") == values * 4
    assert kv_cache_bytes(c, 1) == kv_cache_bytes(c, 1, kv_type="f16") == values * 2  # f16 is the default
    assert kv_cache_bytes(c, 100, n_seq=3, kv_type="f32") == 300 * values * 4
    if c.head_dim % 32 == 0:
        assert kv_cache_bytes(c, 1, kv_type="q8_0") == values // 32 * 34
    with pytest.raises(ValueError, match="kv_type"):
        kv_cache_bytes(c, 1, kv_type="q4_0")


def test_a_cache_larger_than_available_memory_is_refused_with_the_largest_context_that_fits(tiny):
    per_token = kv_cache_bytes(tiny.config, 1)
    with pytest.raises(ResourceLimitError, match=f"at most {1000} tokens"):
        check_kv_cache_fits(tiny.config, 1001, available=1000 * per_token)
    with pytest.warns(RuntimeWarning):  # 1000 tokens is also past this tiny model's trained 128
        assert check_kv_cache_fits(tiny.config, 1000, available=1000 * per_token) == 1000 * per_token


def test_a_context_past_the_trained_length_warns(tiny):
    with pytest.warns(RuntimeWarning, match="longer than"):
        check_kv_cache_fits(tiny.config, tiny.config.n_ctx_train + 1, available=10**15)


def test_backends_refuse_an_impossible_context_up_front(tiny):
    t0 = time.perf_counter()
    with pytest.raises(ResourceLimitError, match="KV cache"):
        NativeBackend(tiny, n_ctx=2**40)
    with pytest.raises(ResourceLimitError, match=r"4 sequence\(s\)"):
        NativeMultiBackend(tiny, n_seq=4, n_ctx=2**40)
    assert time.perf_counter() - t0 < 2.0  # refused before any allocation, not after trying
