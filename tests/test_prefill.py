"""Batched prefill equals token-by-token processing.

A prompt goes through the native executor in batches (each weight row read once for up to `max_batch` tokens,
longer prompts in chunks of `max_batch`); decoding the same tokens one at a time must give the same log-probs.
The matmul kernels compute every activation vector with the same arithmetic whatever the batch size, so the
two paths agree to float rounding; the bound below (1e-3 nats) is far under any real bug (a wrong causal mask or
position shifts log-probs by whole nats) and above the rounding seen (~1e-5).

One exception, asked of the kernel table (native_kernels.batch_exact): on the x86 paths batches of 32+ vectors run
GEMMs (the float GEMMs of kernels/gemm_*_avx2.c, the int8 GEMMs with rows in the lanes of every quantized type,
R16 layouts included), equal to the one-vector kernels to float rounding (~1e-7). That rounding flips some later
8-bit activation roundings, and the two paths then differ at the size of onewell's distance to llama.cpp
(llama.cpp's batched and one-token kernels also sum in different orders): measured on Qwen Q4_K_M over each step's
top 10, mean 0.060 / max 0.60 nats for the 65-token prompt here (0.03 / 0.16 over 40 random tokens); on SmolLM2
Q4_1 (135M, the random-token prompts here), mean 0.078-0.096 / max 0.32-0.56 on the AVX-512 and AVX2 paths
(perf-log 36). There the bound is the golden tests' kind (NOISE per model, ~30 % over the measurement; on Qwen a
RoPE base halved is mean 0.13 / max 2.7, a wrong mask or position whole nats), and the greedy token must agree
wherever the sequential run's top-2 margin exceeds twice the max bound.
"""
import numpy as np
import pytest

from onewell.gguf import GGUFReader
from onewell.models.registry import load_spec
from onewell.runtime import native_kernels as nk
from onewell.runtime.native import NativeBackend
from logprob_bounds import log_softmax

TOLERANCE_NATS = 1e-3
# (mean, max) nats over each step's top 10, where a GEMM runs in the layers
NOISE_MEAN, NOISE_MAX = 0.08, 0.8
SMOLLM_NOISE = (0.125, 0.75)
MAX_BATCH = 64
# the lengths the prefill issue names: tiny, around a 32-row tile, long, and longer than one chunk
PROMPT_LENGTHS = (1, 2, 31, 32, 33, 300, MAX_BATCH + 1)


@pytest.fixture(scope="module")
def smollm_spec(smollm_path):
    return load_spec(GGUFReader(smollm_path))


@pytest.fixture(scope="module")
def qwen_spec(qwen_q4km_path):
    return load_spec(GGUFReader(qwen_q4km_path))


def prompt(n: int, n_vocab: int) -> list[int]:
    return np.random.default_rng(n).integers(0, n_vocab, size=n).tolist()


def layers_batch_exact(spec, n_vec: int) -> bool:
    """Whether every layer matrix of the model gives each of n_vec batched vectors exactly its one-vector result"""
    return all(nk.batch_exact(w.ggml_type, n_vec) for layer in spec.layers for w in layer.tensors.values()
               if len(w.shape) == 2)


def check_within_noise(batched: np.ndarray, sequential: np.ndarray, what: str,
                       noise: tuple[float, float] = (NOISE_MEAN, NOISE_MAX)) -> None:
    lb, ls = log_softmax(batched), log_softmax(sequential)
    top = np.argsort(-ls, axis=-1)[:, :10]
    diff = np.abs(np.take_along_axis(lb, top, -1) - np.take_along_axis(ls, top, -1))
    assert diff.mean() < noise[0] and diff.max() < noise[1], f"{what}: mean {diff.mean():.3f} max {diff.max():.3f}"
    margin = np.take_along_axis(ls, top[:, :1], -1)[:, 0] - np.take_along_axis(ls, top[:, 1:2], -1)[:, 0]
    clear = margin > 2 * noise[1]
    assert (batched.argmax(-1)[clear] == sequential.argmax(-1)[clear]).all(), what


def batched_vs_sequential(spec, ids: list[int]) -> tuple[float, np.ndarray, np.ndarray]:
    batched = NativeBackend(spec, n_ctx=512, threads=2, max_batch=MAX_BATCH)
    sequential = NativeBackend(spec, n_ctx=512, threads=2, max_batch=MAX_BATCH)
    all_batched = batched.forward(ids, all_logits=True)
    all_sequential = np.stack([sequential.forward([t], copy=True) for t in ids])
    err = float(np.abs(log_softmax(all_batched) - log_softmax(all_sequential)).max())
    return err, all_batched, all_sequential


@pytest.mark.model
@pytest.mark.parametrize("n", PROMPT_LENGTHS)
def test_batched_prefill_equals_token_by_token_smollm(smollm_spec, n):
    ids = prompt(n, smollm_spec.config.n_vocab)
    err, batched, sequential = batched_vs_sequential(smollm_spec, ids)
    assert batched.shape == sequential.shape == (n, smollm_spec.config.n_vocab)
    if layers_batch_exact(smollm_spec, min(n, MAX_BATCH)):
        assert err < TOLERANCE_NATS, f"prompt of {n}: max |log-prob difference| {err:.2e}"
        assert (batched.argmax(-1) == sequential.argmax(-1)).all()
    else:
        check_within_noise(batched, sequential, f"prompt of {n} through the GEMMs", SMOLLM_NOISE)


@pytest.mark.model
@pytest.mark.parametrize("n", (33, MAX_BATCH + 1))
def test_batched_prefill_equals_token_by_token_qwen(qwen_spec, n):
    ids = prompt(n, qwen_spec.config.n_vocab)
    err, batched, sequential = batched_vs_sequential(qwen_spec, ids)
    if layers_batch_exact(qwen_spec, min(n, MAX_BATCH)):
        assert err < TOLERANCE_NATS, f"prompt of {n}: max |log-prob difference| {err:.2e}"
    else:
        check_within_noise(batched, sequential, f"prompt of {n} through the float GEMM")


@pytest.mark.model
def test_chunk_size_does_not_change_the_result(smollm_spec):
    """The same 150-token prompt through chunks of 7, 64 and 150 tokens: the last logits agree (to float rounding,
    or within the GEMMs' noise where chunks of 64 and 150 run them and chunks of 7 the exact kernels)."""
    ids = prompt(150, smollm_spec.config.n_vocab)
    last = [NativeBackend(smollm_spec, n_ctx=256, max_batch=mb).forward(ids, copy=True) for mb in (7, 64, 150)]
    for chunked in last[1:]:
        if layers_batch_exact(smollm_spec, 64):
            assert float(np.abs(log_softmax(chunked) - log_softmax(last[0])).max()) < TOLERANCE_NATS
        else:
            check_within_noise(chunked[None], last[0][None], "chunks of 64 / 150 against 7", SMOLLM_NOISE)


@pytest.mark.model
@pytest.mark.parametrize("n", (1, 33, MAX_BATCH + 1))
def test_last_layer_finishes_only_the_output_rows(smollm_spec, n):
    """Without all_logits the last layer's output projection and FFN run only for the rows the output reads
    (the last token; none in a chunk that only fills the cache), as llama.cpp does. Those rows' arithmetic does
    not depend on the batch, so the last logits and the greedy token are the very floats of the all-logits run,
    and the KV cache is the same: the next token decodes to the same logits. (Where the output matrix's type runs
    a float GEMM for the all-logits batch, its last row equals the one-row projection to float rounding: the
    last layer, nothing downstream amplifies it.)"""
    ids = prompt(n, smollm_spec.config.n_vocab)
    every, last, greedy = (NativeBackend(smollm_spec, n_ctx=256, threads=2, max_batch=MAX_BATCH) for _ in range(3))
    all_rows = every.forward(ids, all_logits=True)
    last_logits = last.forward(ids, copy=True)
    if nk.batch_exact(smollm_spec.output.ggml_type, min(n, MAX_BATCH)):
        np.testing.assert_array_equal(last_logits, all_rows[-1])
    else:
        np.testing.assert_allclose(last_logits, all_rows[-1], rtol=0, atol=1e-5 * np.abs(all_rows[-1]).max())
    assert greedy.forward_argmax(ids) == int(np.argmax(last_logits))
    nxt = [int(np.argmax(all_rows[-1]))]
    after = [b.forward(nxt, copy=True) for b in (every, last, greedy)]
    np.testing.assert_array_equal(after[1], after[0])
    np.testing.assert_array_equal(after[2], after[0])
