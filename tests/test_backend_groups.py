"""The batched step on the Backend protocol (runtime/backend.py): NativeBackend is the one-sequence case of
NativeMultiBackend, backends are grouped by the engine they share, and the scheduler's step over a mix of
engines equals running each sequence alone."""
from __future__ import annotations

import numpy as np
import pytest
from test_native_backend import LLAMA_TYPES, tiny_spec

from onewell.runtime import reference as R
from onewell.runtime.backend import BatchedBackend, SequentialGroup, batch_groups
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_multi import NativeMultiBackend
from onewell.serve.scheduler import step_sequences


@pytest.fixture(scope="module")
def spec():
    return tiny_spec("llama", LLAMA_TYPES, seed=3)


def test_native_backend_is_sequence_0_of_a_one_sequence_engine(spec):
    backend = NativeBackend(spec, n_ctx=32, threads=1)
    assert isinstance(backend.group, NativeMultiBackend) and isinstance(backend.group, BatchedBackend)
    assert backend.group.n_seq == 1 and backend.seq_id == 0 and backend.info()["n_seq"] == 1
    single = backend.forward([1, 2, 3], copy=True)
    assert backend.n_past == 3 and backend.group.n_past(0) == 3
    backend.reset()
    (batched,) = backend.group.forward_batch([(0, [1, 2, 3])])  # the engine's batched step, same sequence
    assert backend.n_past == 3
    np.testing.assert_array_equal(batched, single)


def test_batch_groups_put_sequences_of_one_engine_together(spec):
    multi = NativeMultiBackend(spec, 3, n_ctx=32, threads=1)
    lone_a, lone_b = R.ReferenceBackend(spec, n_ctx=32), R.ReferenceBackend(spec, n_ctx=32)
    backends = [multi.sequence(2), lone_a, multi.sequence(0), lone_b]
    groups = batch_groups(backends)
    assert len(groups) == 3
    engine, members = next((g, m) for g, m in groups if g is multi)
    assert members == [(0, 2), (2, 0)]  # (index into backends, seq_id in the engine), in order
    lone = [(g, m) for g, m in groups if g is not multi]
    assert all(isinstance(g, SequentialGroup) and g.n_seq == 1 for g, _ in lone)
    assert sorted(m[0][0] for _, m in lone) == [1, 3]


def test_a_mixed_step_equals_each_sequence_alone(spec):
    multi = NativeMultiBackend(spec, 2, n_ctx=32, threads=1, isa="generic")
    reference = R.ReferenceBackend(spec, n_ctx=32)
    prompts = [[5, 6, 7], [9], [4, 4, 2, 1]]
    out = step_sequences([multi.sequence(0), reference, multi.sequence(1)], prompts)
    alone = [NativeBackend(spec, n_ctx=32, threads=1, isa="generic").forward(prompts[0], copy=True),
             R.ReferenceBackend(spec, n_ctx=32).forward(prompts[1]),
             NativeBackend(spec, n_ctx=32, threads=1, isa="generic").forward(prompts[2], copy=True)]
    for got, want in zip(out, alone):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
    assert multi.n_past(0) == 3 and multi.n_past(1) == 4 and reference.n_past == 1


def test_a_refused_request_fails_alone_in_its_engine(spec):
    multi = NativeMultiBackend(spec, 2, n_ctx=8, threads=1)
    out = step_sequences([multi.sequence(0), multi.sequence(1)], [[1, 2], list(range(9))])  # 9 > n_ctx
    assert isinstance(out[0], np.ndarray) and isinstance(out[1], Exception)
    assert multi.n_past(0) == 2 and multi.n_past(1) == 0
