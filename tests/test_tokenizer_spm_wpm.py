"""SentencePiece and WordPiece rules on tiny synthetic vocabularies, the newer pre-tokenizers and space clean-up."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from onewell.errors import GGUFError, UnsupportedError
from onewell.tokenizer import IncrementalDecoder, Tokenizer, TokenizerError
from onewell.tokenizer.cleanup import clean_spaces
from onewell.tokenizer.pretokenize import PreTokenizer
from onewell.tokenizer.wordpiece import basic_split

UNKNOWN, CONTROL, USER_DEFINED, BYTE = 2, 3, 4, 6

# ---------------------------------------------------------------------------------------------------------------
# SentencePiece

SPM_NORMAL = {  # token -> score (higher merges first)
    "▁": -5.0, "a": -6.0, "b": -6.0, "c": -6.0, "x": -6.0,
    "ab": -1.0, "bc": -0.5, "aa": -1.0, "▁a": -2.0, "▁b": -2.0, "▁x": -3.0,
}


def spm_metadata(with_bytes: bool = True, **overrides) -> dict:
    tokens = ["<unk>", "<s>", "</s>", "<tool>"]
    types = [UNKNOWN, CONTROL, CONTROL, USER_DEFINED]
    scores = [0.0, 0.0, 0.0, 0.0]
    if with_bytes:
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        types += [BYTE] * 256
        scores += [0.0] * 256
    tokens += list(SPM_NORMAL)
    types += [1] * len(SPM_NORMAL)
    scores += list(SPM_NORMAL.values())
    metadata = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": np.array(types, dtype=np.int32),
        "tokenizer.ggml.scores": np.array(scores, dtype=np.float32),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
    }
    metadata.update(overrides)
    return {k: v for k, v in metadata.items() if v is not None}


@pytest.fixture(scope="module")
def spm() -> Tokenizer:
    return Tokenizer.from_metadata(spm_metadata())


def ids_of(tok: Tokenizer, *texts: str) -> list[int]:
    return [tok.vocab.token_to_id[t] for t in texts]


def test_spm_merges_the_highest_score_first(spm):
    # "b c" (-0.5) beats "a b" (-1.0) and "▁ a" (-2.0); then "▁ a" is the only pair left that is a token
    assert spm.encode("abc", add_bos=False) == ids_of(spm, "▁a", "bc")
    assert spm.encode("ab") == ids_of(spm, "▁", "ab")  # "▁a" (-2) loses to "ab" (-1)
    assert spm.encode("ba") == ids_of(spm, "▁b", "a")


def test_spm_ties_merge_leftmost_first(spm):
    assert spm.encode("xaaa") == ids_of(spm, "▁x", "aa", "a")


def test_spm_spaces_become_the_meta_symbol(spm):
    assert spm.encode("a b") == ids_of(spm, "▁a", "▁b")
    assert spm.encode("  ") == ids_of(spm, "▁", "▁", "▁")


def test_spm_byte_fallback_and_its_decoding(spm):
    ids = spm.encode("é")
    assert ids == ids_of(spm, "▁", "<0xC3>", "<0xA9>")
    assert spm.decode(ids) == "é"  # the prefix space is dropped again
    decoder = IncrementalDecoder(spm)
    assert [decoder.add(i) for i in ids] + [decoder.flush()] == [" ", "", "é", ""]


def test_spm_leading_space_rule_restarts_after_special_tokens(spm):
    assert spm.encode("a</s>a") == ids_of(spm, "▁a", "</s>", "▁a")
    assert spm.encode("a<tool>b", parse_special=False) == ids_of(spm, "▁a", "<tool>", "▁b")  # user-defined
    assert spm.encode("a</s>", parse_special=False)[:1] == ids_of(spm, "▁a")
    assert spm.encode("a", add_bos=True) == [1, *ids_of(spm, "▁a")]
    assert spm.encode("") == [] and spm.encode("", add_bos=True) == [1]


def test_spm_without_space_prefix():
    tok = Tokenizer.from_metadata(spm_metadata(**{"tokenizer.ggml.add_space_prefix": False}))
    assert tok.encode("a</s>a") == ids_of(tok, "a", "</s>", "a")
    assert tok.decode(ids_of(tok, "▁a")) == " a"  # nothing to take away


def test_spm_decode_renders_kinds(spm):
    ids = [1, *ids_of(spm, "▁a", "<tool>"), 0, 2]
    assert spm.decode(ids) == "<s> a<tool><unk></s>"
    # llama.cpp: a skipped BOS first means the next token's space is not the prefix space, and stays
    assert spm.decode(ids, skip_special=True) == " a<tool>"
    assert spm.decode(ids[1:], skip_special=True) == "a<tool>"
    assert spm.token_bytes(spm.vocab.token_to_id["<0x41>"]) == b"A"


def test_spm_hostile_values_decode_to_nothing_not_a_crash():
    md = spm_metadata()
    md["tokenizer.ggml.tokens"] = list(md["tokenizer.ggml.tokens"])
    md["tokenizer.ggml.tokens"][4] = "<0xZZ>"  # typed as a byte token, but no hex
    md["tokenizer.ggml.scores"] = md["tokenizer.ggml.scores"].copy()
    md["tokenizer.ggml.scores"][-3:] = np.nan
    tok = Tokenizer.from_metadata(md)
    assert tok.token_bytes(4) == b""
    ids = tok.encode("ab ba x\u00e9")
    assert all(0 <= i < tok.n_vocab for i in ids) and tok.decode(ids) == "ab ba x\u00e9"


def test_spm_defaults_follow_llama_cpp():
    md = spm_metadata(**{"tokenizer.ggml.bos_token_id": None, "tokenizer.ggml.eos_token_id": None,
                         "tokenizer.ggml.unknown_token_id": None, "tokenizer.ggml.scores": None})
    tok = Tokenizer.from_metadata(md)
    assert (tok.bos_id, tok.eos_id, tok.vocab.unk_id, tok.add_bos_token) == (1, 2, 0, True)
    # all scores 0: every merge ties, so pairs merge left to right
    assert tok.encode("xaaa") == ids_of(tok, "▁x", "aa", "a")


def test_spm_without_byte_tokens_falls_back_to_unknown():
    tok = Tokenizer.from_metadata(spm_metadata(with_bytes=False))
    assert tok.encode("é") == [*ids_of(tok, "▁"), 0, 0]  # one <unk> per byte


@pytest.mark.parametrize("change, message", [
    ({"tokenizer.ggml.scores": np.zeros(3, dtype=np.float32)}, "scores has 3 entries"),
    ({"tokenizer.ggml.scores": "high"}, "scores must be an array"),
    ({"tokenizer.ggml.scores": ["x"] * 300}, "scores must be an array"),
    ({"tokenizer.ggml.add_space_prefix": "yes"}, "add_space_prefix must be a bool"),
])
def test_spm_malformed_metadata(change, message):
    with pytest.raises(GGUFError, match=message):
        Tokenizer.from_metadata(spm_metadata(**change))


def test_long_spm_text_is_fast(spm):
    import time

    start = time.perf_counter()
    ids = spm.encode("ab " * 5000)
    assert time.perf_counter() - start < 2.0
    assert ids == ids_of(spm, "▁", "ab") + ids_of(spm, "▁", "ab") * 4999 + ids_of(spm, "▁")


# ---------------------------------------------------------------------------------------------------------------
# WordPiece

WPM_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁world", "▁un", "aff", "able", "▁a", "▁,", "▁!",
              "▁你", "▁好", "▁cafe", "▁café", "▁$"]


def wpm_metadata(**overrides) -> dict:
    types = [CONTROL] * 4 + [1] * (len(WPM_TOKENS) - 4)
    metadata = {
        "tokenizer.ggml.model": "bert",
        "tokenizer.ggml.pre": "jina-v2-en",  # ignored: WordPiece has one pre-tokenization
        "tokenizer.ggml.tokens": list(WPM_TOKENS),
        "tokenizer.ggml.token_type": np.array(types, dtype=np.int32),
        "tokenizer.ggml.unknown_token_id": 1,
        "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.seperator_token_id": 3,
        "tokenizer.ggml.padding_token_id": 0,
    }
    metadata.update(overrides)
    return {k: v for k, v in metadata.items() if v is not None}


@pytest.fixture(scope="module")
def wpm() -> Tokenizer:
    return Tokenizer.from_metadata(wpm_metadata())


def test_wordpiece_greedy_longest_match(wpm):
    assert wpm.encode("unaffable") == ids_of(wpm, "▁un", "aff", "able")
    assert wpm.encode("Hello, World!") == ids_of(wpm, "▁hello", "▁,", "▁world", "▁!")


def test_wordpiece_unknown_word_is_one_unk(wpm):
    assert wpm.encode("unaffx hello") == [1, *ids_of(wpm, "▁hello")]  # the matched "▁un", "aff" are dropped


def test_wordpiece_cls_and_sep(wpm):
    assert wpm.encode("hello", add_bos=True) == [2, *ids_of(wpm, "▁hello"), 3]
    assert wpm.add_bos_token


def test_wordpiece_normalizer_options():
    assert basic_split("Café  Ünïcode", lowercase=True, strip_accents=True) == ["cafe", "unicode"]
    assert basic_split("Café", lowercase=False, strip_accents=False) == ["Café"]
    assert basic_split("你好a,b$c€d", lowercase=True, strip_accents=True) == ["你", "好", "a", ",", "b", "$", "c€d"]
    assert basic_split("he\x00l\u200blo\tworld", lowercase=True, strip_accents=True) == ["hello", "world"]
    cased = Tokenizer.from_metadata(wpm_metadata(**{"tokenizer.ggml.normalizer.lowercase": False}))
    assert cased.encode("café Hello") == [*ids_of(cased, "▁café"), 1]  # accents kept too, by default
    mixed = Tokenizer.from_metadata(wpm_metadata(**{"tokenizer.ggml.normalizer.strip_accents": False}))
    assert mixed.encode("CAFÉ") == ids_of(mixed, "▁café")


def test_wordpiece_cjk_and_symbols(wpm):
    assert wpm.encode("你好$") == ids_of(wpm, "▁你", "▁好", "▁$")


def test_wordpiece_without_unk_fails_clearly():
    tok = Tokenizer.from_metadata(wpm_metadata(**{"tokenizer.ggml.unknown_token_id": None,
                                                  "tokenizer.ggml.tokens": ["[PAD]", "▁a"],
                                                  "tokenizer.ggml.token_type": np.array([3, 1], dtype=np.int32),
                                                  "tokenizer.ggml.bos_token_id": None,
                                                  "tokenizer.ggml.seperator_token_id": None}))
    assert tok.encode("a") == [1]
    with pytest.raises(TokenizerError, match="no WordPiece spelling"):
        tok.encode("b")


# ---------------------------------------------------------------------------------------------------------------
# Pre-tokenizers, clean-up and errors


@pytest.mark.parametrize("text, words", [
    ("12345 abc", ["123", "45", " abc"]),
    ("I'M here", ["I", "'M", " here"]),
    ("x  1", ["x", " ", " ", "1"]),
])
def test_llama3_pre_tokenizer(text, words):
    assert PreTokenizer("llama-bpe").split(text) == words


def test_qwen35_keeps_combining_marks_in_words():
    text = "cafe\u0301s"
    assert PreTokenizer("qwen2").split(text) == ["cafe", "\u0301s"]
    assert PreTokenizer("qwen35").split(text) == [text]


@pytest.mark.parametrize("raw, clean", [
    (b"a , b . c ! d ?", b"a, b. c! d?"),
    (b" .", b"."),
    (b"say ' hi ' now", b"say'hi'now"),
    (b"it 's I 'm we 're you 've", b"it's I'm we're you've"),
    (b"don 't I 'd we 'll", b"don 't I 'd we 'll"),
    (b"", b""),
])
def test_clean_spaces(raw, clean):
    assert clean_spaces(raw) == clean


def test_unknown_models_and_pre_tokenizers_are_named():
    with pytest.raises(UnsupportedError, match=r"'ugm'.*tokenizer.ggml.model"):
        Tokenizer.from_metadata(spm_metadata(**{"tokenizer.ggml.model": "ugm"}))
    from test_tokenizer import synthetic_metadata

    with pytest.raises(UnsupportedError, match=r"'falcon'.*tokenizer.ggml.pre.*llama-bpe"):
        Tokenizer.from_metadata(synthetic_metadata(**{"tokenizer.ggml.pre": "falcon"}))
    # SentencePiece and WordPiece have no pre-tokenizer: the key is not consulted
    assert Tokenizer.from_metadata(spm_metadata(**{"tokenizer.ggml.pre": "anything"})).vocab.model == "llama"


@given(tokens=st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=30, unique=True),
       types=st.lists(st.integers(min_value=-1, max_value=9), min_size=30, max_size=30),
       scores=st.lists(st.floats(allow_nan=True, width=32), min_size=30, max_size=30),
       model=st.sampled_from(["llama", "bert"]), text=st.text(max_size=30), parse_special=st.booleans())
@settings(max_examples=80, deadline=None)
def test_random_vocabularies_never_crash(tokens, types, scores, model, text, parse_special):
    md = {"tokenizer.ggml.model": model, "tokenizer.ggml.tokens": tokens,
          "tokenizer.ggml.token_type": np.array(types[:len(tokens)], dtype=np.int32),
          "tokenizer.ggml.scores": np.array(scores[:len(tokens)], dtype=np.float32)}
    tok = Tokenizer.from_metadata(md)
    try:
        ids = tok.encode(text, add_bos=tok.add_bos_token, parse_special=parse_special)
    except TokenizerError:
        return  # a character the vocabulary cannot spell at all, said by name
    assert all(0 <= i < tok.n_vocab for i in ids)
    tok.decode(ids)
    tok.decode(ids, skip_special=True)
