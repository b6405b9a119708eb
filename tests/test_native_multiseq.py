"""Several sequences in one native step (runtime/native_multi.py, ow_executor_forward_batch): every result must
equal what each sequence gives alone on a single-sequence NativeBackend, bit for bit (the matmul kernels
compute each activation vector on its own, and attention reads only the token's own cache)."""
from __future__ import annotations

import numpy as np
import pytest
from test_native_backend import TINY, tiny_spec

from onewell._native import _core
from onewell.errors import ContextOverflowError
from onewell.models.base import ModelSpec
from onewell.runtime.backend import Backend
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_multi import NativeMultiBackend


@pytest.fixture(scope="module", params=list(TINY))
def tiny(request) -> ModelSpec:
    style, types = TINY[request.param]
    return tiny_spec(style, types)


def prompts(n_vocab: int, lengths, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, n_vocab, n).tolist() for n in lengths]


def alone(spec: ModelSpec, **kw) -> NativeBackend:
    return NativeBackend(spec, threads=2, **kw)


def greedy_together(multi: NativeMultiBackend, starts: list[list[int]], steps: int) -> list[list[int]]:
    logits = multi.forward_batch(list(enumerate(starts)))
    out = [[int(np.argmax(row))] for row in logits]
    for _ in range(steps - 1):
        logits = multi.forward_batch([(s, [toks[-1]]) for s, toks in enumerate(out)])
        for toks, row in zip(out, logits):
            toks.append(int(np.argmax(row)))
    return out


def greedy_alone(backend: NativeBackend, start: list[int], steps: int) -> list[int]:
    backend.reset()
    out = [backend.forward_argmax(start)]
    while len(out) < steps:
        out.append(backend.forward_argmax([out[-1]]))
    return out


def test_batched_step_equals_each_sequence_alone(tiny: ModelSpec):
    # max_batch 8 cuts the 16 tokens of the first step across sequences (a sequence spans two C calls)
    multi = NativeMultiBackend(tiny, n_seq=3, n_ctx=32, max_batch=8, threads=2)
    singles = [alone(tiny, n_ctx=32, max_batch=8) for _ in range(3)]
    for step, lengths in enumerate([(5, 9, 2), (1, 3, 1), (1, 1, 6)]):
        batch = prompts(tiny.config.n_vocab, lengths, seed=step)
        got = multi.forward_batch(list(enumerate(batch)))
        for s, (tokens, single) in enumerate(zip(batch, singles)):
            np.testing.assert_array_equal(got[s], single.forward(tokens), err_msg=f"step {step}, sequence {s}")
            assert multi.n_past(s) == single.n_past
    # every token's logits: one array per request, rows in token order
    batch = prompts(tiny.config.n_vocab, (2, 4, 3), seed=9)
    got = multi.forward_batch(list(enumerate(batch)), all_logits=True)
    for s, (tokens, single) in enumerate(zip(batch, singles)):
        np.testing.assert_array_equal(got[s], single.forward(tokens, all_logits=True))


def test_greedy_generation_of_four_sequences_together_equals_each_alone(tiny: ModelSpec):
    starts = prompts(tiny.config.n_vocab, (3, 7, 1, 4), seed=3)
    multi = NativeMultiBackend(tiny, n_seq=4, n_ctx=48, max_batch=16, threads=2)
    together = greedy_together(multi, starts, steps=12)
    single = alone(tiny, n_ctx=48, max_batch=16)
    assert together == [greedy_alone(single, s, 12) for s in starts]
    assert len({tuple(t) for t in together}) > 1  # the sequences really differ


def test_one_sequences_truncate_and_reset_leave_the_others_alone(tiny: ModelSpec):
    multi = NativeMultiBackend(tiny, n_seq=3, n_ctx=32, max_batch=8, threads=2)
    a, b, c = prompts(tiny.config.n_vocab, (6, 5, 4), seed=5)
    multi.forward_batch([(0, a), (1, b), (2, c)])
    multi.truncate(0, 2)
    multi.reset(1)
    assert [multi.n_past(s) for s in range(3)] == [2, 0, 4]
    tail = prompts(tiny.config.n_vocab, (3, 2, 1), seed=6)
    got = multi.forward_batch([(0, tail[0]), (1, tail[1]), (2, tail[2])])
    for s, history in enumerate([a[:2], [], c]):
        single = alone(tiny, n_ctx=32, max_batch=8)
        if history:
            single.forward(history)
        np.testing.assert_array_equal(got[s], single.forward(tail[s]))
    with pytest.raises(ValueError, match="cannot truncate"):
        multi.truncate(2, 6)


def test_a_sequence_view_is_a_backend(tiny: ModelSpec):
    multi = NativeMultiBackend(tiny, n_seq=2, n_ctx=24, max_batch=4, threads=2)
    view, other = multi.sequence(1), multi.sequence(0)
    assert isinstance(view, Backend) and view.n_ctx == 24
    tokens = prompts(tiny.config.n_vocab, (9,), seed=7)[0]
    single = alone(tiny, n_ctx=24, max_batch=4)
    np.testing.assert_array_equal(view.forward(tokens), single.forward(tokens))
    assert (view.n_past, other.n_past) == (9, 0)
    view.truncate(4)
    single.truncate(4)
    assert view.forward_argmax([5]) == single.forward_argmax([5])
    view.reset()
    assert view.n_past == 0
    with pytest.raises(ContextOverflowError):
        view.forward([1] * 25)


def test_bad_requests_raise_clear_errors_before_anything_runs(tiny: ModelSpec):
    multi = NativeMultiBackend(tiny, n_seq=2, n_ctx=8, max_batch=4, threads=2)
    multi.forward_batch([(0, [1, 2, 3])])
    for bad, message in [
        ([(2, [1])], "sequence id 2"),
        ([(-1, [1])], "sequence id -1"),
        ([(True, [1])], "sequence id True"),
        ([(0, [1]), (0, [2])], "more than once"),
        ([(1, [tiny.config.n_vocab])], "outside the vocabulary"),
        ([(1, [])], "non-empty"),
        ([], "at least one"),
    ]:
        with pytest.raises(ValueError, match=message):
            multi.forward_batch(bad)
    with pytest.raises(ContextOverflowError):
        multi.forward_batch([(1, [1]), (0, [1] * 6)])  # 3 + 6 > 8 in sequence 0: sequence 1 must not run either
    assert (multi.n_past(0), multi.n_past(1)) == (3, 0)
    for kwargs in (dict(n_seq=0), dict(n_seq=2.0), dict(n_ctx=0)):
        with pytest.raises(ValueError):
            NativeMultiBackend(tiny, **{"n_seq": 2, **kwargs})


def test_the_c_side_rechecks_batch_arguments(tiny: ModelSpec):
    multi = NativeMultiBackend(tiny, n_seq=2, n_ctx=8, max_batch=4, threads=2)
    nv = tiny.config.n_vocab
    logits = np.empty((2, nv), dtype=np.float32)

    def i32(*v):
        return np.array(v, dtype=np.int32)

    for tokens, seqs, pos, out, mode, message in [
        (i32(1, 2), i32(0, 2), i32(0, 0), logits, 0, "sequence id"),
        (i32(1, 2), i32(0, -1), i32(0, 0), logits, 0, "sequence id"),
        (i32(1, 2), i32(0, 0), i32(0, 2), logits, 0, "not consecutive"),
        (i32(1, 2), i32(0, 0), i32(3, 3), logits, 0, "not consecutive"),
        (i32(1), i32(1), i32(8), logits, 0, "position"),
        (i32(1), i32(1), i32(-1), logits, 0, "position"),
        (i32(nv), i32(0), i32(0), logits, 0, "vocabulary"),
        (i32(1, 2, 3, 4, 5), i32(0, 0, 0, 0, 0), i32(0, 1, 2, 3, 4), logits, 0, "max_batch"),
        (i32(1, 2), i32(0, 1), i32(0, 0), logits[:1], 0, "logits buffer"),  # two sequences: two rows
        (i32(1, 2), i32(0, 0), i32(0, 1), None, 1, "logits buffer"),
        (i32(1), i32(0), i32(0), logits, 2, "bad arguments"),  # no greedy mode for batches
        (i32(1, 2), i32(0), i32(0, 1), logits, 0, "same length"),
        (i32(), i32(), i32(), logits, 0, "non-empty"),
    ]:
        with pytest.raises(ValueError, match=message):
            _core.executor_forward_batch(multi._ex, tokens, seqs, pos, out, mode)
    # interleaved sequences with consecutive positions are fine; one row per sequence
    _core.executor_forward_batch(multi._ex, i32(1, 2, 3), i32(0, 1, 0), i32(0, 0, 1), logits, 0)
    assert _core.executor_info(multi._ex)["n_seq"] == 2


@pytest.fixture(scope="module")
def smollm(smollm_path) -> ModelSpec:
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    return load_spec(GGUFReader(smollm_path))


@pytest.mark.model
def test_smollm_batched_step_and_greedy_equal_each_sequence_alone(smollm: ModelSpec):
    single = alone(smollm, n_ctx=64, max_batch=16)
    multi = NativeMultiBackend.from_backend(single, n_seq=4)
    assert multi.plan is single.plan  # the weights (and any repacked copies) are shared
    starts = prompts(smollm.config.n_vocab, (11, 3, 20, 6), seed=1)
    got = multi.forward_batch(list(enumerate(starts[:3])))
    for s in range(3):
        single.reset()
        np.testing.assert_array_equal(got[s], single.forward(starts[s]))
    for s in range(3):
        multi.reset(s)
    together = greedy_together(multi, starts, steps=8)
    assert together == [greedy_alone(single, s, 8) for s in starts]
