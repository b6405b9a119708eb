"""qwen3, llama 3.x (rope_freqs) and phi3 (fused QKV and gate/up) against llama.cpp, on random-weight models
with the real vocabularies (tests/random_models.py), rebuilt here from their seeds. llama.cpp's top-32
log-probabilities at every position were recorded once (tests/data/llamacpp_logits_random.json, see
tests/data/README.md); here both backends are teacher-forced over the same ids and compared on those ids, and
our tokenizer must give the ids llama.cpp's gave the recipe's text.

Tolerances, in nats over the 32 ids of each position (measured; the native figures are the same on the generic
and AVX2 paths):
  mixed F16/Q8_0 weights: llama.cpp quantizes activations to 8 bits (Q8_0 weights) or f16 (F16 weights) and
    keeps an f16 KV cache. The float reference differs by mean 0.05-0.06 / max 0.15-0.19; native, with the same
    8-bit activations as llama.cpp, by mean 0.036 / 0.058 / 0.054, max 0.17 / 0.38 / 0.36 (qwen3 / llama3 /
    phi3): an activation rounding that flips differently moves a logit by up to a few tenths.
    Bounds: mean 0.1, max 0.5.
  all-F32 weights: only llama.cpp's f16 KV cache differs: mean 0.002-0.003 / max 0.015-0.026, reference and
    native alike. Bounds: mean 0.01, max 0.05.
  all-BF16 qwen3 (recorded on an AVX512-BF16 CPU, tests/data/README.md): llama.cpp rounds activations to bf16;
    the reference and the native generic/AVX2 paths (float32 activations) differ by mean 0.028 / max 0.13, the
    AVX512-BF16 kernels (bf16 activations, as llama.cpp) by mean 0.019 / max 0.083. Bounds: the mixed ones.
A wrong model is far outside (test_the_comparison_sees_a_wrong_model): a missing q/k norm, missing rope_freqs,
the other RoPE pairing, swapped gate/up halves or K/V rows move them by more than 1 nat on average (1.7-10).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA

import random_models
from onewell.gguf import GGUFReader
from onewell.models.base import ModelSpec
from onewell.models.registry import load_spec
from onewell.runtime.native_kernels import available_paths
from onewell.runtime.reference import ReferenceBackend
from onewell.tokenizer import Tokenizer
from logprob_bounds import log_softmax

RECORD = json.loads((DATA / "llamacpp_logits_random.json").read_text(encoding="utf-8"))
MODELS = list(random_models.RECIPES)
TOLERANCE = {"mixed": (0.1, 0.5), "f32": (0.01, 0.05)}  # (mean, max) |ours - llama.cpp| in nats


def tolerance(name: str) -> tuple[float, float]:
    return TOLERANCE["f32" if name.endswith("-f32") else "mixed"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """Every recipe built once; the weights must be the ones llama.cpp saw."""
    folder = tmp_path_factory.mktemp("random_models")
    for name, recipe in random_models.RECIPES.items():
        path = random_models.build(recipe, folder / f"{name}.gguf")
        assert random_models.weights_sha256(path) == RECORD["models"][name]["weights_sha256"], \
            f"{name}: the builder no longer makes the model llama.cpp's logits were recorded on; " \
            f"re-record with scripts/record_llamacpp_logits.sh"
    return folder


def at_recorded_ids(name: str, logits: np.ndarray) -> np.ndarray:
    """Our log-probabilities of llama.cpp's top ids: (positions, top_k)."""
    return np.take_along_axis(log_softmax(logits), np.array(RECORD["models"][name]["top_ids"]), axis=1)


def distance(name: str, ours: np.ndarray) -> tuple[float, float]:
    diff = np.abs(ours - np.array(RECORD["models"][name]["top_logprobs"]))
    return float(diff.mean()), float(diff.max())


def reference_logprobs(name: str, spec: ModelSpec) -> np.ndarray:
    ids = RECORD["models"][name]["ids"]
    return at_recorded_ids(name, ReferenceBackend(spec, n_ctx=len(ids)).forward(ids, all_logits=True))


def test_the_record_covers_every_recipe_and_real_vocabularies():
    assert set(RECORD["models"]) == set(MODELS)
    for name, recipe in random_models.RECIPES.items():
        rec = RECORD["models"][name]
        assert rec["n_vocab"] == len(random_models.tokenizer_metadata(recipe.vocab)["tokenizer.ggml.tokens"][0])
        assert (rec["seed"], rec["arch"], rec["text"]) == (recipe.seed, recipe.arch, recipe.text)
        assert len(rec["top_ids"]) == len(rec["ids"]) >= 16 and len(rec["top_ids"][0]) == RECORD["top_k"]


@pytest.mark.parametrize("name", list(random_models.MIXED))
def test_our_tokenizer_gives_the_ids_llama_cpp_evaluated(model_dir: Path, name: str):
    rec = RECORD["models"][name]
    tokenizer = Tokenizer.from_metadata(GGUFReader(model_dir / f"{name}.gguf").metadata)
    assert tokenizer.encode(rec["text"], add_bos=tokenizer.add_bos_token, parse_special=False) == rec["ids"]


@pytest.mark.parametrize("name", MODELS)
def test_reference_backend_matches_llama_cpp(model_dir: Path, name: str):
    spec = load_spec(GGUFReader(model_dir / f"{name}.gguf"))
    mean, worst = distance(name, reference_logprobs(name, spec))
    print(f"\n{name}: reference vs llama.cpp mean {mean:.4f} max {worst:.4f}")
    bound_mean, bound_max = tolerance(name)
    assert mean <= bound_mean and worst <= bound_max, (mean, worst)


def _swapped(a: str, b: str):
    def mutate(spec: ModelSpec) -> ModelSpec:
        return dataclasses.replace(spec, layers=[l.with_tensors(**{a: l[b], b: l[a]}) for l in spec.layers])
    return mutate


def _other_rope_pairing(spec: ModelSpec) -> ModelSpec:
    style = "normal" if spec.config.rope_style == "neox" else "neox"
    return dataclasses.replace(spec, config=dataclasses.replace(spec.config, rope_style=style))


def _without(role: str):
    def mutate(spec: ModelSpec) -> ModelSpec:
        if role == "rope_freqs":
            return dataclasses.replace(spec, tensors={k: v for k, v in spec.tensors.items() if k != role})
        return dataclasses.replace(spec, layers=[l.with_tensors(**{role: None}) for l in spec.layers])
    return mutate


BUGS = {"qwen3": {"no q_norm": _without("q_norm"), "no k_norm": _without("k_norm")},
        "llama3": {"no rope_freqs": _without("rope_freqs")},
        "phi3": {"gate/up halves swapped": _swapped("w_gate", "w_up"), "K/V rows swapped": _swapped("wk", "wv")}}


@pytest.mark.parametrize("arch", list(BUGS))
def test_the_comparison_sees_a_wrong_model(model_dir: Path, arch: str):
    """The feature each architecture adds matters to the recorded numbers: without it (or with the other RoPE
    pairing) the reference lands far outside the tolerance, so passing the tests above means something."""
    name = f"{arch}-f32"
    spec = load_spec(GGUFReader(model_dir / f"{name}.gguf"))
    for bug, mutate in {**BUGS[arch], "other RoPE pairing": _other_rope_pairing}.items():
        mean, _ = distance(name, reference_logprobs(name, mutate(spec)))
        assert mean > 10 * TOLERANCE["mixed"][0], (bug, mean)


# One process per ISA path: ONEWELL_ISA caps the element-wise ops' ISA at process start, isa= picks the matmul path.
NATIVE_SCRIPT = """
import json, sys
import numpy as np
from onewell.gguf import GGUFReader
from onewell.models.registry import load_spec
from onewell.runtime.native import NativeBackend
record_path, folder, isa, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
record = json.load(open(record_path, encoding="utf-8"))["models"]
out = {}
for name in names:
    try:
        backend = NativeBackend(load_spec(GGUFReader(f"{folder}/{name}.gguf")), n_ctx=64, isa=isa)
        logits = backend.forward(record[name]["ids"], all_logits=True)
        np.save(f"{folder}/{name}.{isa}.npy", logits)
        out[name] = {"kpath": backend.info()["kpath"], "ops_isa": backend.info()["ops_isa"]}
    except Exception as e:  # reported per model: one unsupported feature does not hide the other models
        out[name] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def native_runs(model_dir: Path):
    runs: dict[str, dict] = {}

    def run(isa: str) -> dict:
        if isa not in runs:
            env = dict(os.environ, ONEWELL_ISA=isa.split("-")[0])  # avx2-vnni: element-wise ops at avx2
            done = subprocess.run([sys.executable, "-c", NATIVE_SCRIPT, str(DATA / "llamacpp_logits_random.json"),
                                   str(model_dir), isa, *MODELS], env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, done.stderr
            runs[isa] = json.loads(done.stdout)
        return runs[isa]
    return run


@pytest.mark.parametrize("isa", available_paths())
@pytest.mark.parametrize("name", MODELS)
def test_native_backend_matches_llama_cpp_on_every_isa_path(model_dir: Path, native_runs, name: str, isa: str):
    result = native_runs(isa)[name]
    assert "error" not in result, f"{name} on {isa}: {result.get('error')}"
    assert result["kpath"] == isa and result["ops_isa"] == isa.split("-")[0]
    mean, worst = distance(name, at_recorded_ids(name, np.load(model_dir / f"{name}.{isa}.npy")))
    print(f"\n{name} [{isa}]: native vs llama.cpp mean {mean:.4f} max {worst:.4f}")
    bound_mean, bound_max = tolerance(name)
    assert mean <= bound_mean and worst <= bound_max, (mean, worst)
