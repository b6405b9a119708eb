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


@pytest.mark.parametrize("key, value", [
    ("tokenizer.ggml.token_type", [1.0, float("inf"), 1.0]),
    ("tokenizer.ggml.token_type", [1.0, 1.0, 3.0]),   # whole floats are still not token types
    ("tokenizer.ggml.bos_token_id", float("inf")),
    ("tokenizer.ggml.eos_token_id", 2.0),
])
def test_float_token_types_and_ids_are_refused_as_gguf_errors(key, value):
    """The bug behind float_token_type_with_inf.gguf: int() on metadata floats raised OverflowError for inf
    and truncated the rest; every non-integer now is a GGUFError naming the key."""
    import numpy as np

    from onewell.errors import GGUFError
    from onewell.tokenizer import Tokenizer

    metadata = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
                "tokenizer.ggml.tokens": ["a", "b", "<|im_end|>"], "tokenizer.ggml.merges": [],
                key: np.asarray(value, dtype=np.float32) if isinstance(value, list) else value}
    with pytest.raises(GGUFError, match=key):
        Tokenizer.from_metadata(metadata)
