"""A short run of the GGUF fuzzer's loading harness (fuzz/gguf_harness.py) on ~1,000 structure-aware
mutations of the seed corpus: every input must end as a working model or an onewell.errors exception, each
within 2 s (times ONEWELL_TEST_TIME_SCALE, see conftest.py). The long coverage-guided run is fuzz/run_fuzz.py (docs/reliability.md)."""
from __future__ import annotations

import random
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import scaled

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fuzz/ folder at the repository root

from fuzz.gguf_harness import VALID_RAN, run_one  # noqa: E402
from fuzz.mutate import mutate, walk  # noqa: E402
from fuzz.seeds import seed_corpus  # noqa: E402

N_INPUTS = 1000
SECONDS_PER_INPUT = scaled(2.0)


@pytest.fixture(scope="module")
def seeds() -> dict[str, bytes]:
    return seed_corpus()


def test_seeds_reach_the_stage_they_are_meant_for(seeds, tmp_path):
    scratch = tmp_path / "seed.gguf"
    for name, data in seeds.items():
        outcome = run_one(data, scratch)
        if name.startswith("tiny_"):
            assert outcome == VALID_RAN, name  # loads, tokenizes, runs native forward steps
        elif name.startswith("header_"):
            assert outcome == "GGUFError", name  # real header, no tensor data
        else:
            assert outcome == "UnsupportedError", name  # builders' files have architecture "test"


def test_the_mutator_sees_the_fields_of_every_seed(seeds):
    for name, data in seeds.items():
        kinds = {f.kind for f in walk(data)}
        assert {"count", "length", "vtype"} <= kinds, name
        if not name.startswith("header_"):
            assert {"dims", "ggml_type", "offset", "data"} <= kinds, name


def test_mutated_model_files_end_in_a_model_or_an_onewell_error(seeds, tmp_path):
    rng = random.Random(20240607)
    corpus = list(seeds.values())
    scratch = tmp_path / "input.gguf"
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    for i in range(N_INPUTS):
        data = mutate(rng.choice(corpus), rng, corpus)
        started = time.perf_counter()
        try:
            outcomes[run_one(data, scratch)] += 1  # an exception not from onewell.errors propagates
        except Exception as e:
            (tmp_path / "finding.gguf").write_bytes(data)
            raise AssertionError(f"input {i} (kept in {tmp_path / 'finding.gguf'}): {type(e).__name__}: {e}") from e
        slowest = max(slowest, time.perf_counter() - started)
    assert sum(outcomes.values()) == N_INPUTS
    assert slowest < SECONDS_PER_INPUT
    # the run reached every stage: broken headers, refused models and models that ran
    assert outcomes["GGUFError"] > N_INPUTS // 10, outcomes
    assert outcomes[VALID_RAN] > N_INPUTS // 50, outcomes
    assert outcomes["UnsupportedError"] > 0, outcomes
