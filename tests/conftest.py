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
