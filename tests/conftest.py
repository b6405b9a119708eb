"""Shared fixtures: paths of the default models (pulled and cached on first use) and the golden data, and the
time scale of tests that assert on wall time."""
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

DATA = Path(__file__).parent / "data"


def _time_scale() -> float:
    """ONEWELL_TEST_TIME_SCALE (default 1): how many times slower than a native run this one is expected to be.
    scripts/test_aarch64.sh sets it under qemu (10-20x slower); tests multiply their wall-time budgets and the
    delays they race against by it, so what they assert is unchanged on native runs (scale 1)."""
    raw = os.environ.get("ONEWELL_TEST_TIME_SCALE", "1")
    try:
        scale = float(raw)
    except ValueError:
        raise ValueError(f"ONEWELL_TEST_TIME_SCALE must be a number >= 1, got {raw!r}") from None
    if not scale >= 1:
        raise ValueError(f"ONEWELL_TEST_TIME_SCALE must be a number >= 1, got {raw!r}")
    return scale


TIME_SCALE = _time_scale()


def scaled(seconds: float) -> float:
    """A wall-time budget or delay of a native run, stretched by ONEWELL_TEST_TIME_SCALE."""
    return seconds * TIME_SCALE


if TIME_SCALE > 1:
    # Hypothesis' per-example deadline and its too-slow health check are wall-time budgets too; under emulation
    # only, they go (the properties and the number of examples stay the same)
    settings.register_profile("time-scaled", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("time-scaled")


def read_jsonl(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


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
