"""Pre-tokenizers: split text into the words that BPE then encodes one by one, per `tokenizer.ggml.pre`.

The patterns are the ones llama.cpp uses for each pre-tokenizer type (llama-vocab.cpp), applied the way its
unicode_regex_split does: the patterns of a type run in sequence, each one splitting every piece the previous one
produced (so lookaheads never see past a piece), and text a pattern does not match stays a piece of its own.
`\\s` in the `regex` package is Unicode White_Space, the same set llama.cpp treats as whitespace.
"""
from __future__ import annotations

from dataclasses import dataclass

import regex

# Qwen2 (tokenizer.json's pattern with the case-insensitive group spelled out, as llama.cpp does).
_QWEN2 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)

# GPT-2's pattern; llama.cpp's hand-written matcher for it also falls back to `\s+`.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Each digit on its own first (StarCoder-family tokenizers, SmolLM among them), then GPT-2 inside the rest.
_SINGLE_DIGITS = r"\p{N}"

# Llama 3: Qwen2's pattern with numbers in runs of up to three digits.
_LLAMA3 = _QWEN2.replace(r"|\p{N}|", r"|\p{N}{1,3}|")

# Qwen 3.5: Qwen2's pattern with combining marks (\p{M}) counted as part of words, not punctuation.
_QWEN35 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+"
    r"|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)


@dataclass(frozen=True)
class PreTokenizerKind:
    """What llama.cpp does for one `tokenizer.ggml.pre` value (llama_vocab::impl::load and llm_tokenizer_bpe)."""
    patterns: tuple[str, ...]
    clean_spaces: bool = False  # decode() removes the space before . , ! ? and some contractions
    ignore_merges: bool = False  # a word that is a token as a whole is that token, whatever the merges say
    add_bos: bool = False  # llama.cpp's default when the file has no tokenizer.ggml.add_bos_token


_LLAMA3_KIND = PreTokenizerKind((_LLAMA3,), clean_spaces=True, ignore_merges=True, add_bos=True)

# tokenizer.ggml.pre -> how llama.cpp pre-tokenizes for it.
_KINDS: dict[str, PreTokenizerKind] = {
    "qwen2": PreTokenizerKind((_QWEN2,)),
    "deepseek-r1-qwen": PreTokenizerKind((_QWEN2,)),
    "qwen35": PreTokenizerKind((_QWEN35,)),
    "smollm": PreTokenizerKind((_SINGLE_DIGITS, _GPT2)),
    "llama-bpe": _LLAMA3_KIND,
    "llama3": _LLAMA3_KIND,
    "llama-v3": _LLAMA3_KIND,
}

SUPPORTED_PRE_TOKENIZERS = frozenset(_KINDS)


def pre_tokenizer_kind(pre: str) -> PreTokenizerKind:
    kind = _KINDS.get(pre)
    if kind is None:
        from onewell.errors import UnsupportedError

        raise UnsupportedError(f"pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported "
                               f"(supported: {', '.join(sorted(SUPPORTED_PRE_TOKENIZERS))})")
    return kind


def _split_one(piece: str, pattern: regex.Pattern) -> list[str]:
    words = []
    end = 0
    for match in pattern.finditer(piece):
        if match.start() > end:  # unmatched text between matches is a piece too
            words.append(piece[end:match.start()])
        words.append(match.group())
        end = match.end()
    if end < len(piece):
        words.append(piece[end:])
    return words


class PreTokenizer:
    """Splits text into words for one `tokenizer.ggml.pre` type."""

    def __init__(self, pre: str):
        self.pre = pre
        self.kind = pre_tokenizer_kind(pre)
        self._patterns = [regex.compile(p) for p in self.kind.patterns]

    def split(self, text: str) -> list[str]:
        pieces = [text] if text else []
        for pattern in self._patterns:
            pieces = [word for piece in pieces for word in _split_one(piece, pattern)]
        return pieces
