"""Sampling filters on hand-made logits: each knob does what llama.cpp's does, and seeds repeat."""

import numpy as np
import pytest

from onewell.runtime.sampling import (
    Sampler,
    SamplingParams,
    apply_logit_bias,
    apply_presence_frequency,
    apply_repeat_penalty,
    min_p_keep,
    top_p_keep,
)


def draws(params: SamplingParams, logits, n: int = 400, history=()) -> list[int]:
    sampler = Sampler(params)
    return [sampler.sample(np.asarray(logits, dtype=np.float32), history) for _ in range(n)]


def only(**kw) -> SamplingParams:
    """Every filter off except the ones named."""
    base = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=0)
    base.update(kw)
    return SamplingParams(**base)


LOGITS = [1.0, 3.0, 2.5, 0.5, 2.9, -1.0]  # best: 1 (3.0), then 4 (2.9), 2 (2.5), 0, 3, 5


def test_greedy_is_argmax_whatever_the_seed():
    for seed in range(5):
        assert set(draws(SamplingParams(temperature=0, seed=seed), LOGITS, n=20)) == {1}


def test_top_k_2_only_ever_picks_the_two_best():
    picked = draws(only(top_k=2), LOGITS)
    assert set(picked) == {1, 4}  # both occur (near-equal logits), nothing else does


def test_top_k_0_is_off():
    assert set(draws(only(top_k=0), LOGITS, n=2000)) == set(range(6))


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    assert top_p_keep(probs, 0.5) == 1
    assert top_p_keep(probs, 0.51) == 2
    assert top_p_keep(probs, 0.79) == 2
    assert top_p_keep(probs, 0.81) == 3
    assert top_p_keep(probs, 1.0) == 4
    logits = np.log([0.5, 0.3, 0.15, 0.05])
    assert set(draws(only(top_p=0.7), logits)) == {0, 1}


def test_min_p_drops_tokens_below_a_fraction_of_the_best():
    probs = np.array([0.6, 0.25, 0.1, 0.05])
    assert min_p_keep(probs, 0.4) == 2   # 0.25 >= 0.24, 0.1 < 0.24
    assert min_p_keep(probs, 0.0) == 4
    assert min_p_keep(probs, 1.0) == 1
    logits = np.log(probs)
    assert set(draws(only(min_p=0.4), logits)) == {0, 1}


def test_repeat_penalty_divides_positive_and_multiplies_negative_logits():
    logits = np.array([2.0, -2.0, 4.0, 1.0], dtype=np.float32)
    out = apply_repeat_penalty(logits, history=[0, 1, 1, 1], penalty=2.0, last_n=64)
    np.testing.assert_allclose(out, [1.0, -4.0, 4.0, 1.0])  # each seen token penalized once
    assert logits[0] == 2.0  # the caller's array is left alone


def test_repeat_penalty_looks_back_only_last_n():
    logits = np.array([2.0, 2.0, 2.0], dtype=np.float32)
    out = apply_repeat_penalty(logits, history=[0, 1, 2], penalty=2.0, last_n=1)
    np.testing.assert_allclose(out, [2.0, 2.0, 1.0])
    out = apply_repeat_penalty(logits, history=[0, 1, 2], penalty=2.0, last_n=-1)
    np.testing.assert_allclose(out, [1.0, 1.0, 1.0])
    assert apply_repeat_penalty(logits, [0], penalty=2.0, last_n=0) is logits


def test_repeat_penalty_changes_the_greedy_choice():
    logits = [3.0, 2.0, 0.0]
    assert draws(SamplingParams(temperature=0), logits, n=1, history=[0]) == [0]
    assert draws(SamplingParams(temperature=0, repeat_penalty=2.0), logits, n=1, history=[0]) == [1]


def test_temperature_sharpens_and_flattens():
    logits = [1.0, 0.0]
    cold = draws(only(temperature=0.25), logits, n=2000).count(0) / 2000
    warm = draws(only(temperature=4.0), logits, n=2000).count(0) / 2000
    # exact: 1/(1+e^-4) = 0.982, 1/(1+e^-0.25) = 0.562
    assert abs(cold - 0.982) < 0.02 and abs(warm - 0.562) < 0.04


def test_frequencies_match_the_distribution():
    logits = np.log([0.7, 0.2, 0.1])
    counts = np.bincount(draws(only(), logits, n=5000), minlength=3) / 5000
    np.testing.assert_allclose(counts, [0.7, 0.2, 0.1], atol=0.03)


def test_same_seed_same_sequence_different_seed_different_sequence():
    logits = np.zeros(50, dtype=np.float32)
    a = draws(SamplingParams(seed=42, top_k=0, min_p=0), logits, n=50)
    b = draws(SamplingParams(seed=42, top_k=0, min_p=0), logits, n=50)
    c = draws(SamplingParams(seed=43, top_k=0, min_p=0), logits, n=50)
    assert a == b
    assert a != c


def test_masked_tokens_are_never_drawn():
    logits = np.array([0.0, -np.inf, 0.0, -np.inf], dtype=np.float32)
    assert set(draws(only(), logits, n=300)) == {0, 2}


def test_logit_bias_adds_to_the_logits_and_can_ban_or_force():
    logits = np.array(LOGITS, dtype=np.float32)
    out = apply_logit_bias(logits, SamplingParams(logit_bias={1: -2.0, 5: 4.0}).logit_bias)
    assert out.tolist() == pytest.approx([1.0, 1.0, 2.5, 0.5, 2.9, 3.0]) and logits[1] == 3.0  # input untouched
    assert draws(only(temperature=0, logit_bias={1: -100}), LOGITS, n=1) == [4]
    assert set(draws(only(logit_bias={5: 100}), LOGITS, n=200)) == {5}
    assert set(draws(only(logit_bias={1: -100, 4: -100}), LOGITS, n=300)) == {0, 2, 3, 5}


def test_presence_and_frequency_penalties_count_generated_tokens_only():
    logits = np.zeros(4, dtype=np.float32)
    out = apply_presence_frequency(logits, {1: 1, 2: 3}, presence=0.5, frequency=0.25)
    assert out.tolist() == pytest.approx([0.0, -0.75, -1.25, 0.0])
    # greedy with a presence penalty never repeats while an unused token is close enough
    flat = [2.0, 1.9, 1.8, 1.7]
    assert draws(only(temperature=0, presence_penalty=1.0), flat, n=4, history=[0, 0, 0]) == [0, 1, 2, 3]
    assert draws(only(temperature=0), flat, n=4) == [0, 0, 0, 0]  # the prompt (history) is not counted
    # a negative frequency penalty makes a used token ever more likely
    assert draws(only(temperature=0, frequency_penalty=-1.0), [1.0, 1.5], n=3) == [1, 1, 1]


@pytest.mark.parametrize("kw, fragment", [
    (dict(presence_penalty=2.5), "presence_penalty"),
    (dict(frequency_penalty=float("nan")), "frequency_penalty"),
    (dict(logit_bias={-1: 1.0}), "logit_bias"),
    (dict(logit_bias={3: 101.0}), "logit_bias"),
    (dict(logit_bias={"3": 1.0}), "logit_bias"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(temperature=float("inf")), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_p=float("nan")), "top_p"),
    (dict(min_p=-0.1), "min_p"),
    (dict(top_k=-1), "top_k"),
    (dict(top_k=2.5), "top_k"),
    (dict(repeat_penalty=0.0), "repeat_penalty"),
    (dict(repeat_last_n=-2), "repeat_last_n"),
    (dict(seed=-1), "seed"),
    (dict(temperature="hot"), "temperature"),
])
def test_bad_parameters_are_refused_by_name(kw, fragment):
    with pytest.raises(ValueError, match=fragment):
        SamplingParams(**kw)


def test_nan_logits_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        Sampler(SamplingParams(seed=0)).sample(np.array([0.0, np.nan], dtype=np.float32))


def test_logit_bias_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Sampler(SamplingParams(logit_bias={10: 1.0})).sample(np.zeros(4, dtype=np.float32))
