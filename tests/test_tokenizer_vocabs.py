"""Real vocabularies against llama.cpp: its own test vectors (tests/data/vocab) and Gemma 3's golden tokenization."""
from __future__ import annotations

import time
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA, read_jsonl
from onewell.gguf import GGUFReader
from onewell.tokenizer import IncrementalDecoder, Tokenizer

VOCAB = DATA / "vocab"
SEPARATOR = "\n__ggml_vocab_test__\n"


@lru_cache(maxsize=None)
def load(name: str) -> Tokenizer:
    with GGUFReader(VOCAB / f"ggml-vocab-{name}.gguf") as reader:
        return Tokenizer.from_metadata(reader.metadata)


def vectors(name: str) -> list[tuple[str, list[int]]]:
    """The texts of NAME.gguf.inp and llama.cpp's ids for each (split the way its test-tokenizer-0 splits)."""
    raw = (VOCAB / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8")
    texts = []
    pos = 0
    while pos < len(raw):
        end = raw.find(SEPARATOR, pos)
        if end < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:end])
        pos = end + len(SEPARATOR)
    lines = (VOCAB / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    assert len(lines) >= len(texts) and not any(lines[len(texts):])
    return [(text, [int(t) for t in line.split()]) for text, line in zip(texts, lines)]


NAMES = ["llama-bpe", "llama-spm", "phi-3", "bert-bge", "qwen35"]


@pytest.fixture(params=NAMES)
def named(request) -> tuple[str, Tokenizer]:
    return request.param, load(request.param)


def test_every_llama_cpp_vector_matches(named):
    name, tok = named
    cases = vectors(name)
    assert len(cases) >= 45
    for text, ids in cases:
        # llama.cpp's test-tokenizer-0: no BOS/CLS, special tokens not parsed
        assert tok.encode(text, parse_special=False) == ids, (name, text)


def test_vocab_kinds(named):
    name, tok = named
    expected = {"llama-bpe": ("gpt2", True), "llama-spm": ("llama", True), "phi-3": ("llama", True),
                "bert-bge": ("bert", True), "qwen35": ("gpt2", False)}
    assert (tok.vocab.model, tok.add_bos_token) == expected[name]


@pytest.mark.parametrize("name", ["llama-spm", "phi-3", "qwen35"])
def test_decode_gives_back_the_vectors_text(name):
    tok = load(name)
    for text, ids in vectors(name):
        assert tok.decode(ids) == text
        decoder = IncrementalDecoder(tok)
        streamed = "".join(decoder.add(i) for i in ids) + decoder.flush()
        # a stream continues a text, so it keeps the space SentencePiece put before its first word
        assert streamed == (" " + text if tok.vocab.add_space_prefix and ids else text)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2581"), max_size=40))
@settings(max_examples=150, deadline=None)
def test_sentencepiece_round_trips_any_text(text):
    # byte fallback spells every character, so decoding gives the text back (a literal "▁" would come back as " ")
    for name in ("llama-spm", "gemma3"):
        tok = load(name)
        ids = tok.encode(text, parse_special=False)
        assert all(0 <= i < tok.n_vocab for i in ids)
        assert tok.decode(ids) == text


def test_llama_bpe_decode_cleans_spaces_like_llama_cpp():
    tok = load("llama-bpe")
    text = "Hello , world ! I 'm here, he 's not . ' quoted ' they 'll"
    assert tok.decode(tok.encode(text)) == "Hello, world! I'm here, he's not.'quoted'they 'll"


def test_special_tokens_and_bos_of_spm_vocabs():
    spm = load("llama-spm")
    assert spm.encode("Hello", add_bos=True) == [1] + spm.encode("Hello")
    # a special token cuts the text, and the text after it gets the leading space again
    assert spm.encode("<s>Hi</s>Hi") == [1, *spm.encode("Hi"), 2, *spm.encode("Hi")]
    assert spm.encode("<s>", parse_special=False)[0] != 1
    phi = load("phi-3")
    end, user = phi.vocab.token_to_id["<|end|>"], phi.vocab.token_to_id["<|user|>"]
    # llama.cpp strips whitespace after Phi-3's special tokens (rstrip)
    assert phi.encode("<|user|>\nHi<|end|>\n") == [user, *phi.encode("Hi"), end]
    assert end in phi.eog_ids


def test_wordpiece_adds_cls_and_sep():
    bert = load("bert-bge")
    ids = bert.encode("Hello world", add_bos=True)
    assert ids[0] == bert.vocab.token_to_id["[CLS]"] == 101 and ids[-1] == bert.vocab.token_to_id["[SEP]"] == 102
    assert ids[1:-1] == bert.encode("hello WORLD")  # the vocabulary is lowercased


# ---------------------------------------------------------------------------------------------------------------
# Gemma 3 (262,144 SentencePiece tokens; tests/data/vocab/ggml-vocab-gemma3.gguf holds the model's tokenizer keys)


@pytest.fixture
def gemma() -> Tokenizer:
    return load("gemma3")


def test_gemma3_loads_quickly():
    start = time.perf_counter()
    tok = load.__wrapped__("gemma3")
    elapsed = time.perf_counter() - start
    assert tok.n_vocab == 262144
    assert elapsed < 10.0, f"loading Gemma 3's vocabulary took {elapsed:.1f} s"  # ~2 s on a busy 2-core machine


def test_gemma3_golden_tokenization(gemma):
    cases = read_jsonl("tokenize_gemma3-270m-q4_k_m.jsonl")
    assert len(cases) > 40
    for case in cases:
        assert gemma.encode(case["text"]) == case["ids"], case["text"]
        assert gemma.decode(case["ids"]) == case["text"]
    # the golden texts exercise byte fallback and user-defined whitespace tokens
    used = {i for case in cases for i in case["ids"]}
    assert any(gemma.vocab.tokens[i].startswith("<0x") for i in used)
    assert gemma.vocab.token_to_id["\n"] in used


def test_gemma3_golden_prompts_and_completions(gemma):
    assert gemma.add_bos_token and gemma.bos_id == 2 and not gemma.vocab.add_space_prefix
    assert {1, 106} <= gemma.eog_ids  # <eos>, <end_of_turn>
    for case in read_jsonl("greedy_gemma3-270m-q4_k_m.jsonl"):
        assert gemma.encode(case["prompt"], add_bos=gemma.add_bos_token) == case["prompt_ids"]
        ids = case["completion_ids"]
        if ids and ids[-1] in gemma.eog_ids:
            ids = ids[:-1]
        decoder = IncrementalDecoder(gemma)
        chunks = [decoder.add(i) for i in ids] + [decoder.flush()]
        assert "".join(chunks) == case["completion_text"]
        assert all("\ufffd" not in c for c in chunks) or "\ufffd" in case["completion_text"]


@pytest.mark.model
def test_gemma3_vocab_file_holds_the_models_tokenizer(gemma):
    """The vocabulary file stands for the real model: its tokenizer keys equal the pulled, verified GGUF's."""
    import numpy as np

    from onewell.hub import ensure_model
    from onewell.hub_registry import REGISTRY

    if "gemma-3-270m" not in REGISTRY:
        pytest.skip("gemma-3-270m is not in the hub registry of this checkout")
    with GGUFReader(ensure_model("gemma-3-270m")) as model, GGUFReader(VOCAB / "ggml-vocab-gemma3.gguf") as vocab:
        keys = sorted(k for k in model.metadata if k.startswith("tokenizer."))
        assert keys == sorted(k for k in vocab.metadata if k.startswith("tokenizer."))
        for key in keys:
            ours, theirs = vocab.metadata[key], model.metadata[key]
            assert np.array_equal(ours, theirs) if isinstance(theirs, np.ndarray) else ours == theirs, key
        real = Tokenizer.from_metadata(model.metadata)
    for case in read_jsonl("tokenize_gemma3-270m-q4_k_m.jsonl"):
        assert real.encode(case["text"]) == case["ids"]


def test_gemma3_encodes_10kb_quickly(gemma):
    text = "".join(case["text"] + "\n" for case in read_jsonl("tokenize_gemma3-270m-q4_k_m.jsonl"))
    text = (text * (10240 // len(text) + 1))[:10240]
    start = time.perf_counter()
    ids = gemma.encode(text)
    assert time.perf_counter() - start < 2.0
    assert gemma.decode(ids) == text


# ---------------------------------------------------------------------------------------------------------------
# Extra texts recorded from llama.cpp (tests/data/vocab/record_llamacpp.py): special tokens, BOS / [CLS] [SEP],
# Unicode edge cases, in three modes, and llama.cpp's detokenization of its own ids.


def extra_cases(vocab: str) -> list[dict]:
    return [c for c in read_jsonl("vocab/llamacpp_extra.jsonl") if c["vocab"] == vocab]


@pytest.mark.parametrize("name", NAMES + ["gemma3"])
def test_recorded_llama_cpp_extras(name):
    tok = load(name)
    cases = extra_cases(name)
    assert len(cases) == 81
    for case in cases:
        add_bos = case["add_special"] and tok.add_bos_token  # llama.cpp's add_special adds what the vocab asks
        got = tok.encode(case["text"], add_bos=add_bos, parse_special=case["parse_special"])
        assert got == case["ids"], case
        assert tok.decode(case["ids"]) == case["detokenized"], case
