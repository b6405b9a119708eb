"""Every input the GGUF fuzzer ever found breaking the contract, replayed through the fuzz harness: each must
now end in the outcome recorded in tests/data/fuzz_regressions/expected.json."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fuzz/ folder at the repository root

from fuzz.gguf_harness import load_and_run, run_one  # noqa: E402
from onewell.errors import OnewellError  # noqa: E402

CASES = Path(__file__).parent / "data" / "fuzz_regressions"
EXPECTED = json.loads((CASES / "expected.json").read_text())


def test_every_kept_input_has_an_expected_outcome():
    files = sorted(p.name for p in CASES.glob("*.gguf"))
    assert files, "no regression inputs kept"
    assert files == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kept_fuzz_input_ends_in_its_expected_outcome(name, tmp_path):
    case = EXPECTED[name]
    data = (CASES / name).read_bytes()
    assert run_one(data, tmp_path / "input.gguf") == case["outcome"]
    if case["outcome"] not in ("valid", "valid (no native step)"):
        with pytest.raises(OnewellError, match=case["message"]):
            load_and_run(CASES / name)


@pytest.mark.parametrize("tensor", ["output_norm.weight", "blk.0.ffn_norm.weight", "blk.0.attn_k.bias"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_norm_or_bias_is_refused_at_load_by_name(tensor, bad, tmp_path):
    """The bug behind nan_in_attn_norm.gguf, on every kind of 1-D tensor: refused by load_spec as a GGUFError
    naming the tensor, before any backend sees it."""
    import numpy as np

    from fuzz.seeds import QWEN2_TINY, tiny_model
    from onewell.errors import GGUFError
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    path = tmp_path / "tiny.gguf"
    path.write_bytes(tiny_model(QWEN2_TINY, None))
    with GGUFReader(path) as reader:
        load_spec(reader)  # the untouched file loads
        offset = reader.tensors[tensor].offset
    data = bytearray(path.read_bytes())
    data[offset + 4:offset + 8] = np.float32(bad).tobytes()
    path.write_bytes(bytes(data))
    with GGUFReader(path) as reader, pytest.raises(GGUFError, match=f"{tensor}.*NaN or inf"):
        load_spec(reader)
