"""Shared fixtures: paths of the default models (pulled and cached on first use) and the golden data."""
import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


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
