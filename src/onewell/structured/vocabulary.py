"""Our tokenizer as llguidance sees it: every token's bytes, the end-of-generation ids, and a tokenize callback.

Control tokens (<|im_end|>, <|endoftext|>, ...) get llguidance's 0xFF prefix, which marks them as special:
grammar text can never produce them, only the end of a grammar (EOS) can. User-defined tokens such as
Qwen's `<tool_call>` stay plain text, so a grammar literal "<tool_call>" matches the single token the model
was trained to write as well as the same text spelled in pieces.

Building the table walks the whole vocabulary (~2 s for Qwen's 151,936 tokens), so it is cached per tokenizer.
"""
from __future__ import annotations

import threading
import weakref

from onewell.structured.engine import llguidance

SPECIAL_PREFIX = b"\xff"

_cache: "weakref.WeakKeyDictionary[object, object]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # requests on several worker threads: build each table once


class _Wrapped:
    """The duck-typed object llguidance.TokenizerWrapper reads (tokens, eos/bos ids, a tokenize call)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.tokens = [(SPECIAL_PREFIX if tokenizer.is_control(i) else b"") + tokenizer.token_bytes(i)
                       for i in range(tokenizer.n_vocab)]
        eos = tokenizer.eos_id
        self.eos_token_id = eos if eos is not None else min(tokenizer.eog_ids, default=0)
        self.bos_token_id = tokenizer.bos_id
        self.special_token_ids = [i for i in range(tokenizer.n_vocab) if tokenizer.is_control(i)]

    def __call__(self, text: bytes | str) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return self._tokenizer.encode(text, add_bos=False, parse_special=False)


def ll_tokenizer(tokenizer):
    """The llguidance.LLTokenizer for `tokenizer` (built once, then cached while the tokenizer lives)."""
    with _lock:
        cached = _cache.get(tokenizer)
        if cached is None:
            lib = llguidance()
            eog = sorted(tokenizer.eog_ids) or None
            wrapped = lib.TokenizerWrapper(_Wrapped(tokenizer))
            cached = _cache[tokenizer] = lib.LLTokenizer(wrapped, n_vocab=tokenizer.n_vocab, eos_token=eog)
        return cached
