"""WordPiece (`tokenizer.ggml.model = "bert"`: BERT-family embedding models such as bge and nomic-embed).

BERT's basic pre-tokenization (optional lowercasing and accent stripping, whitespace split, every punctuation
mark and CJK ideograph a word of its own), then per word the longest vocabulary token from the left, again and
again. llama.cpp's GGUF spells a word-initial piece with a leading "▁" and a continuation piece bare (the
"##" of the original vocabulary is gone), so each word is looked up as "▁" + word. A word with any position
no token matches becomes [UNK] as a whole. Follows llama.cpp's llm_tokenizer_wpm.
"""
from __future__ import annotations

import unicodedata
from functools import lru_cache

from onewell.tokenizer.spm import SPACE

# Unicode White_Space, the set llama.cpp's tokenizers treat as whitespace.
_WHITESPACE = frozenset(map(chr, [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                                  0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))

# CJK ideograph blocks BERT splits into single characters (the ranges llama.cpp and HF tokenizers use).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))

_SKIP, _SPACE_CHAR, _ALONE, _WORD = range(4)


def _is_cjk(cpt: int) -> bool:
    return any(lo <= cpt <= hi for lo, hi in _CJK_RANGES)


def _lower(ch: str) -> str:
    low = ch.lower()
    return low if len(low) == 1 else low[0]  # the simple (one-character) mapping, as llama.cpp's table has


@lru_cache(maxsize=1 << 16)
def _classify(ch: str, lowercase: bool, strip_accents: bool) -> tuple[int, str]:
    """(kind, normalized text) of one character."""
    if strip_accents:
        ch = unicodedata.normalize("NFD", ch)[0]  # llama.cpp keeps the first character of the decomposition
    if ch in _WHITESPACE:
        return _SPACE_CHAR, ""
    cpt = ord(ch)
    category = unicodedata.category(ch)
    if cpt == 0 or cpt == 0xFFFD or (category[0] == "C" and category != "Cn"):
        return _SKIP, ""
    if strip_accents and category[0] == "M":
        return _SKIP, ""
    text = _lower(ch) if lowercase else ch
    if category[0] == "P" or (cpt < 0x7F and category[0] == "S") or _is_cjk(cpt):
        return _ALONE, text
    return _WORD, text


def basic_split(text: str, lowercase: bool, strip_accents: bool) -> list[str]:
    """BERT's basic pre-tokenization: the words WordPiece then encodes one by one."""
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        kind, norm = _classify(ch, lowercase, strip_accents)
        if kind == _WORD:
            current.append(norm)
            continue
        if kind == _SKIP:
            continue
        if current:
            words.append("".join(current))
            current = []
        if kind == _ALONE:
            words.append(norm)
    if current:
        words.append("".join(current))
    return words


class WordPieceEncoder:
    def __init__(self, token_to_id: dict[str, int], unk_id: int | None, lowercase: bool, strip_accents: bool):
        self._token_to_id = token_to_id
        self._unk_id = unk_id
        self._lowercase = lowercase
        self._strip_accents = strip_accents
        self._max_len = max(map(len, token_to_id))

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in basic_split(text, self._lowercase, self._strip_accents):
            ids.extend(self.encode_word(word))
        return ids

    def encode_word(self, word: str) -> list[int]:
        spelled = SPACE + word
        lookup = self._token_to_id
        n = len(spelled)
        ids = []
        i = 0
        while i < n:
            for j in range(min(n, i + self._max_len), i, -1):
                token_id = lookup.get(spelled[i:j])
                if token_id is not None:
                    ids.append(token_id)
                    i = j
                    break
            else:  # no token starts here: the whole word is unknown
                ids = []
                break
        if ids:
            return ids
        if self._unk_id is None:
            from onewell.tokenizer.tokenizer import TokenizerError

            raise TokenizerError(f"word {word!r} has no WordPiece spelling and the vocabulary has no [UNK]")
        return [self._unk_id]
