"""Pre-tokenizers: split text into the words that BPE then encodes one by one, per `tokenizer.ggml.pre`.

The patterns are the ones llama.cpp uses for each pre-tokenizer type (llama-vocab.cpp), applied the way its
unicode_regex_split does: the patterns of a type run in sequence, each one splitting every piece the previous one
produced (so lookaheads never see past a piece), and text a pattern does not match stays a piece of its own.
`\\s` in the `regex` package is Unicode White_Space, the same set llama.cpp treats as whitespace.
"""
from __future__ import annotations

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

# tokenizer.ggml.pre -> the patterns llama.cpp runs for it, in order. Only names whose decoding needs no
# space clean-up (llama.cpp's clean_spaces=false) are listed, because we do not implement that clean-up.
_PATTERNS_BY_PRE: dict[str, tuple[str, ...]] = {
    "qwen2": (_QWEN2,),
    "deepseek-r1-qwen": (_QWEN2,),
    "smollm": (_SINGLE_DIGITS, _GPT2),
}

SUPPORTED_PRE_TOKENIZERS = frozenset(_PATTERNS_BY_PRE)


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
        patterns = _PATTERNS_BY_PRE.get(pre)
        if patterns is None:
            from onewell.errors import UnsupportedError

            raise UnsupportedError(
                f"pre-tokenizer {pre!r} is not supported (supported: {', '.join(sorted(SUPPORTED_PRE_TOKENIZERS))})")
        self.pre = pre
        self._patterns = [regex.compile(p) for p in patterns]

    def split(self, text: str) -> list[str]:
        pieces = [text] if text else []
        for pattern in self._patterns:
            pieces = [word for piece in pieces for word in _split_one(piece, pattern)]
        return pieces
