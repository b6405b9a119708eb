"""Tokenizer from GGUF metadata: a tiny synthetic vocabulary for the rules, the real models against llama.cpp."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import read_jsonl
from onewell.errors import GGUFError, OnewellError, UnsupportedError
from onewell.gguf import GGUFReader
from onewell.tokenizer import IncrementalDecoder, Tokenizer, TokenizerError
from onewell.tokenizer.bpe import BYTE_TO_CHAR, spell_bytes, unspell
from onewell.tokenizer.pretokenize import PreTokenizer

# ---------------------------------------------------------------------------------------------------------------
# A synthetic vocabulary: the 256 byte tokens, a few merges, and special tokens of every kind.

CONTROL, USER_DEFINED, UNUSED, BYTE = 3, 4, 5, 6
MERGES = ["a b", "ab c", "b c", "Ġ a", "Ġa b", "a a"]
SPECIALS = [  # (text, token_type)
    ("<|im_start|>", CONTROL),
    ("<|im_end|>", CONTROL),
    ("<|im_end|>x", CONTROL),      # longer special that contains another: must win where it occurs
    ("<tool>", USER_DEFINED),
    ("<|endoftext|>", CONTROL),
    ("[UNUSED]", UNUSED),
    ("<0x41>", BYTE),
]


def synthetic_metadata(**overrides) -> dict:
    tokens = list(BYTE_TO_CHAR)
    for merge in MERGES:
        left, right = merge.split(" ")
        if left + right not in tokens:
            tokens.append(left + right)
    types = [1] * len(tokens)
    for text, kind in SPECIALS:
        tokens.append(text)
        types.append(kind)
    metadata = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": np.array(types, dtype=np.int32),
        "tokenizer.ggml.merges": list(MERGES),
        "tokenizer.ggml.bos_token_id": tokens.index("<|im_start|>"),
        "tokenizer.ggml.eos_token_id": tokens.index("<|im_end|>"),
    }
    metadata.update(overrides)
    return metadata


@pytest.fixture(scope="module")
def tiny() -> Tokenizer:
    return Tokenizer.from_metadata(synthetic_metadata())


def tid(tok: Tokenizer, text: str) -> int:
    return tok.vocab.token_to_id[text]


def test_byte_alphabet_round_trips_every_byte():
    data = bytes(range(256))
    spelled = spell_bytes(data)
    assert len(set(spelled)) == 256 and " " not in spelled and "\n" not in spelled
    assert spelled[ord("a")] == "a" and spelled[ord(" ")] == "Ġ" and spelled[ord("\n")] == "Ċ"
    assert unspell(spelled) == data


def test_bpe_merges_lowest_rank_first(tiny):
    # "abc": "a b" (rank 0) then "ab c" (rank 1) -> one token, although "b c" also exists.
    assert tiny.encode("abc") == [tid(tiny, "abc")]
    # "bc" alone merges by "b c"
    assert tiny.encode("bc") == [tid(tiny, "bc")]
    # " ab": "a b" has rank 0, beating "Ġ a" (rank 3), so the result is Ġ + ab, not Ġab.
    assert tiny.encode(" ab") == [tid(tiny, "Ġ"), tid(tiny, "ab")]


def test_bpe_ties_merge_leftmost_first(tiny):
    assert tiny.encode("aaa") == [tid(tiny, "aa"), tid(tiny, "a")]
    assert tiny.encode("aaaa") == [tid(tiny, "aa"), tid(tiny, "aa")]


def test_bpe_handles_a_long_word_quickly(tiny):
    start = time.perf_counter()
    ids = tiny.encode("a" * 20001)
    assert time.perf_counter() - start < 2.0
    assert ids == [tid(tiny, "aa")] * 10000 + [tid(tiny, "a")]


def test_special_tokens_are_single_ids_longest_first(tiny):
    ids = tiny.encode("<|im_start|>ab<|im_end|>x<|im_end|>")
    assert ids == [tid(tiny, "<|im_start|>"), tid(tiny, "ab"), tid(tiny, "<|im_end|>x"), tid(tiny, "<|im_end|>")]


def test_parse_special_off_keeps_only_user_defined_tokens(tiny):
    ids = tiny.encode("<|im_end|><tool>", parse_special=False)
    assert tid(tiny, "<|im_end|>") not in ids
    assert ids[-1] == tid(tiny, "<tool>")
    assert tiny.decode(ids) == "<|im_end|><tool>"


def test_add_bos(tiny):
    assert tiny.encode("ab", add_bos=True) == [tiny.bos_id, tid(tiny, "ab")]
    assert tiny.encode("", add_bos=True) == [tiny.bos_id]
    assert tiny.encode("") == []


def test_decode_and_token_bytes_by_kind(tiny):
    assert tiny.token_bytes(tid(tiny, "Ġ")) == b" "
    assert tiny.token_bytes(tid(tiny, "<|im_end|>")) == b"<|im_end|>"
    assert tiny.token_bytes(tid(tiny, "<0x41>")) == b"A"       # byte token
    assert tiny.token_bytes(tid(tiny, "[UNUSED]")) == b""      # unused tokens stand for nothing
    ids = [tid(tiny, "<|im_start|>"), tid(tiny, "ab"), tid(tiny, "<tool>"), tid(tiny, "<|im_end|>")]
    assert tiny.decode(ids) == "<|im_start|>ab<tool><|im_end|>"
    assert tiny.decode(ids, skip_special=True) == "ab<tool>"


def test_invalid_utf8_decodes_to_replacement_characters(tiny):
    first_byte_of_euro = tid(tiny, BYTE_TO_CHAR[0xE2])
    assert tiny.decode([tid(tiny, "a"), first_byte_of_euro]) == "a\ufffd"


def test_special_and_eog_facts(tiny):
    assert tiny.n_vocab == len(synthetic_metadata()["tokenizer.ggml.tokens"])
    assert tiny.is_special(tid(tiny, "<tool>")) and not tiny.is_control(tid(tiny, "<tool>"))
    assert tiny.is_special(tid(tiny, "<|im_end|>")) and tiny.is_control(tid(tiny, "<|im_end|>"))
    assert not tiny.is_special(tid(tiny, "ab"))
    assert tiny.eog_ids == {tid(tiny, "<|im_end|>"), tid(tiny, "<|endoftext|>")}
    assert tiny.chat_template is None


def test_eog_name_forces_control_and_missing_eos_is_none():
    md = synthetic_metadata()
    md["tokenizer.ggml.token_type"] = np.ones(len(md["tokenizer.ggml.tokens"]), dtype=np.int32)  # all "normal"
    del md["tokenizer.ggml.eos_token_id"], md["tokenizer.ggml.bos_token_id"]
    tok = Tokenizer.from_metadata(md)
    assert tok.eos_id is None and tok.bos_id is None
    end = tid(tok, "<|endoftext|>")
    assert end in tok.eog_ids and tok.is_control(end)
    assert tok.encode("a<|endoftext|>") == [tid(tok, "a"), end]
    assert tok.encode("x", add_bos=True) == [tid(tok, "x")]  # no BOS id: nothing to add
    assert tid(tok, "<tool>") not in tok.encode("x<tool>")  # no longer user-defined: spelled out by BPE


def test_unknown_model_and_pre_name_the_supported_ones():
    with pytest.raises(UnsupportedError, match=r"'t5'.*gpt2, llama, bert"):
        Tokenizer.from_metadata(synthetic_metadata(**{"tokenizer.ggml.model": "t5"}))
    with pytest.raises(UnsupportedError, match=r"'falcon'.*qwen2.*smollm"):
        Tokenizer.from_metadata(synthetic_metadata(**{"tokenizer.ggml.pre": "falcon"}))


@pytest.mark.parametrize("change, message", [
    ({"tokenizer.ggml.model": None}, "no tokenizer"),
    ({"tokenizer.ggml.tokens": None}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.tokens": "abc"}, "array of strings"),
    ({"tokenizer.ggml.tokens": [1, 2]}, "array of strings"),
    ({"tokenizer.ggml.tokens": []}, "empty"),
    ({"tokenizer.ggml.tokens": ["a", "a"]}, "duplicate token"),
    ({"tokenizer.ggml.merges": None}, "tokenizer.ggml.merges"),
    ({"tokenizer.ggml.token_type": np.ones(3, dtype=np.int32)}, "token_type has 3 entries"),
    ({"tokenizer.ggml.token_type": ["x"]}, "array of integers"),
    ({"tokenizer.ggml.eos_token_id": "two"}, "must be an integer"),
    ({"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.bos_token_id": None}, "bos_token_id is not set"),
    ({"tokenizer.chat_template": 5}, "chat_template must be a string"),
])
def test_malformed_metadata_is_a_clear_gguf_error(change, message):
    md = synthetic_metadata()
    for key, value in change.items():
        if value is None:
            md.pop(key)
        else:
            md[key] = value
    with pytest.raises(GGUFError, match=message):
        Tokenizer.from_metadata(md)


def test_out_of_range_special_id_is_ignored():
    tok = Tokenizer.from_metadata(synthetic_metadata(**{"tokenizer.ggml.eos_token_id": 10**6}))
    assert tok.eos_id is None


def test_bad_ids_raise_tokenizer_error(tiny):
    for bad in (-1, tiny.n_vocab, "x", None):
        with pytest.raises(TokenizerError):
            tiny.decode([bad])
    with pytest.raises(TokenizerError):
        tiny.token_bytes(tiny.n_vocab)
    assert issubclass(TokenizerError, OnewellError)
    with pytest.raises(TypeError):
        tiny.encode(b"bytes")


def test_lone_surrogate_becomes_replacement_character(tiny):
    assert tiny.decode(tiny.encode("a\ud800b")) == "a\ufffdb"


# ---------------------------------------------------------------------------------------------------------------
# Pre-tokenizers


@pytest.mark.parametrize("text, words", [
    ("hello  world", ["hello", " ", " world"]),
    ("trailing spaces   ", ["trailing", " spaces", "   "]),
    ("\n\n\n", ["\n\n\n"]),
    ("line one\r\nline", ["line", " one", "\r\n", "line"]),
    ("DON'T we've", ["DON", "'T", " we", "'ve"]),
    ("12345", ["1", "2", "3", "4", "5"]),
    ("a (b)!\n\nc", ["a", " (", "b", ")!\n\n", "c"]),
    ("你好，世界", ["你好", "，世界"]),
])
def test_qwen2_pre_tokenizer(text, words):
    assert PreTokenizer("qwen2").split(text) == words


@pytest.mark.parametrize("text, words", [
    ("hello  world", ["hello", " ", " world"]),
    ("3.14 and 2", ["3", ".", "1", "4", " and", " ", "2"]),   # digits split first: " " cannot join "2"
    ("x  1", ["x", "  ", "1"]),                               # trailing spaces of a piece stay together
    ("don't", ["don", "'t"]),
    ("DON'T", ["DON", "'", "T"]),                             # GPT-2's contractions are lower-case only
    ("a\n\nb", ["a", "\n", "\n", "b"]),
])
def test_smollm_pre_tokenizer(text, words):
    assert PreTokenizer("smollm").split(text) == words


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_pre_tokenizers_cover_the_text_exactly(text):
    for pre in ("qwen2", "smollm"):
        words = PreTokenizer(pre).split(text)
        assert "".join(words) == text and all(words)


# ---------------------------------------------------------------------------------------------------------------
# Incremental decoding


def byte_ids(tok: Tokenizer, data: bytes) -> list[int]:
    """One token per byte: the way a model emits a character its vocabulary has no token for."""
    return [tid(tok, BYTE_TO_CHAR[b]) for b in data]


def stream(tok: Tokenizer, ids: list[int], **kwargs) -> list[str]:
    decoder = IncrementalDecoder(tok, **kwargs)
    return [decoder.add(i) for i in ids] + [decoder.flush()]


def test_character_split_over_tokens_is_held_back(tiny):
    ids = [tid(tiny, "a")] + byte_ids(tiny, "🙂".encode()) + byte_ids(tiny, "é".encode())
    chunks = stream(tiny, ids)
    assert chunks == ["a", "", "", "", "🙂", "", "é", ""]


def test_flush_replaces_an_unfinished_character(tiny):
    decoder = IncrementalDecoder(tiny)
    assert decoder.add(byte_ids(tiny, "世".encode())[0]) == ""
    assert decoder.pending_bytes == "世".encode()[:1]
    assert decoder.flush() == "\ufffd"
    assert decoder.add(tid(tiny, "a")) == "a"  # usable again after flush


def test_incremental_skip_special(tiny):
    ids = [tid(tiny, "<|im_start|>"), tid(tiny, "ab"), tid(tiny, "<|im_end|>")]
    assert "".join(stream(tiny, ids, skip_special=True)) == "ab"
    assert "".join(stream(tiny, ids)) == "<|im_start|>ab<|im_end|>"


@given(st.lists(st.integers(min_value=0, max_value=255), max_size=40))
@settings(max_examples=300, deadline=None)
def test_streamed_bytes_equal_one_shot_decode(raw):
    tok = Tokenizer.from_metadata(synthetic_metadata())
    ids = byte_ids(tok, bytes(raw))
    chunks = stream(tok, ids)
    assert "".join(chunks) == tok.decode(ids)
    if "\ufffd" not in tok.decode(ids):
        assert all("\ufffd" not in c for c in chunks)


# ---------------------------------------------------------------------------------------------------------------
# The real models against llama.cpp's output


@pytest.fixture(scope="module")
def qwen(qwen_q4km_path) -> Tokenizer:
    with GGUFReader(qwen_q4km_path) as reader:
        return Tokenizer.from_metadata(reader.metadata)


@pytest.fixture(scope="module")
def smollm(smollm_path) -> Tokenizer:
    with GGUFReader(smollm_path) as reader:
        return Tokenizer.from_metadata(reader.metadata)


@pytest.fixture(params=["qwen", "smollm"])
def model_case(request):
    golden = {"qwen": "tokenize_qwen2.5-coder-0.5b.jsonl", "smollm": "tokenize_smollm2-135m-q4_1.jsonl"}
    greedy = {"qwen": ["greedy_qwen2.5-coder-0.5b-q4_k_m.jsonl", "greedy_qwen2.5-coder-0.5b-q8_0.jsonl"],
              "smollm": ["greedy_smollm2-135m-q4_1.jsonl"]}
    name = request.param
    return request.getfixturevalue(name), golden[name], greedy[name]


@pytest.mark.model
def test_golden_tokenization(model_case):
    tok, golden, _ = model_case
    cases = read_jsonl(golden)
    assert len(cases) > 40
    for case in cases:
        assert tok.encode(case["text"]) == case["ids"], case["text"]
        assert tok.decode(case["ids"]) == case["text"]


@pytest.mark.model
def test_golden_prompts_and_completions(model_case):
    tok, _, greedy_files = model_case
    # Neither default model asks for a BOS (tokenizer.ggml.add_bos_token = false), and llama.cpp added none.
    assert tok.add_bos_token is False
    for name in greedy_files:
        for case in read_jsonl(name):
            assert tok.encode(case["prompt"], add_bos=tok.add_bos_token) == case["prompt_ids"]
            ids = case["completion_ids"]
            # llama.cpp stops at an end-of-generation token and leaves its text out of the completion.
            if ids and ids[-1] in tok.eog_ids:
                ids = ids[:-1]
            assert tok.decode(ids) == case["completion_text"]
            assert "".join(stream(tok, ids)) == case["completion_text"]


@pytest.mark.model
def test_streaming_golden_ids(model_case):
    tok, golden, _ = model_case
    split_characters = 0
    for case in read_jsonl(golden):
        chunks = stream(tok, case["ids"])
        assert "".join(chunks) == case["text"]
        assert all("\ufffd" not in c for c in chunks)
        split_characters += sum(1 for i in case["ids"] if _is_partial(tok.token_bytes(i)))
    assert split_characters > 0  # the golden data does contain characters spread over several tokens


def _is_partial(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


@pytest.mark.model
def test_special_ids_of_the_default_models(qwen, smollm):
    assert (qwen.bos_id, qwen.eos_id) == (151643, 151645)
    assert qwen.eog_ids >= {151643, 151645, 151662, 151663, 151664}  # endoftext, im_end, fim_pad, repo_name, file_sep
    assert qwen.encode("<tool_call>", parse_special=False) == [151657]  # user-defined: always one unit
    assert (smollm.bos_id, smollm.eos_id) == (1, 2)
    assert smollm.eog_ids == {0, 2, 4}  # <|endoftext|>, <|im_end|>, <reponame> (llama.cpp's FIM repo guess)
    assert qwen.chat_template and smollm.chat_template


@pytest.mark.model
def test_encoding_10kb_is_fast(qwen, smollm):
    text = "".join(case["text"] + "\n" for case in read_jsonl("tokenize_qwen2.5-coder-0.5b.jsonl"))
    text = (text * (10240 // len(text) + 1))[:10240]
    for tok in (qwen, smollm):
        tok._bpe._cache.clear()
        start = time.perf_counter()
        ids = tok.encode(text)
        assert time.perf_counter() - start < 0.5
        assert tok.decode(ids) == text
