"""Shared fixtures: paths of the default models (pulled and cached on first use) and the golden data, and the
time scale of tests that assert on wall time."""
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root: fuzz/

from fuzz.time_scale import TIME_SCALE, scaled  # noqa: E402,F401  (tests import scaled from here)


if TIME_SCALE > 1:
    # Hypothesis' per-example deadline and its too-slow health check are wall-time budgets too; under emulation
    # only, they go (the properties and the number of examples stay the same)
    settings.register_profile("time-scaled", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("time-scaled")


def read_jsonl(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def with_knob(knob, value: int, fn):
    """fn() with a process-wide _core knob (e.g. _core.rows_gemm, _core.wide_tiles) set to value, restored after"""
    before = knob(value)
    try:
        return fn()
    finally:
        knob(before)


@pytest.fixture
def float_gemm_on():
    """The float GEMMs under test whatever this CPU's default (_core.float_gemm); the knob restored after"""
    from onewell._native import _core

    before = _core.float_gemm(1)
    yield
    _core.float_gemm(before)


def f16_batch_atol(n_tokens: int) -> float:
    """How far an F16 model's output (an embedding) of a text batched with others into n_tokens may be from the text
    alone: 2e-6 where such batches are exact (the F16 tile = the dot); on the AVX2 paths batches from 32 tokens run
    the float GEMM (perf-log entry 28), whose float rounding the fp16 activations amplify: nomic-embed measured
    3.8e-5 at most (cosine 1 - 6e-8), so 1e-4"""
    from onewell.gguf.constants import GGMLType
    from onewell.runtime.native_kernels import batch_exact

    return 2e-6 if batch_exact(GGMLType.F16, n_tokens) else 1e-4


def _model(name: str) -> Path:
    from onewell.hub import ensure_model

    return ensure_model(name)


@pytest.fixture(scope="session")
def qwen_q4km_path() -> Path:
    return _model("qwen2.5-coder-0.5b-instruct")


@pytest.fixture(scope="session")
def qwen_q8_0_path() -> Path:
    return _model("qwen2.5-coder-0.5b-instruct:q8_0")


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    return _model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def nomic_embed_path() -> Path:
    return _model("nomic-embed-text-v1.5")
