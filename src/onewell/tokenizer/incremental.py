"""Streaming detokenization: text as ids arrive, never cutting a UTF-8 character in half."""
from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onewell.tokenizer.tokenizer import Tokenizer


class IncrementalDecoder:
    """Feed ids one at a time; each add() returns the text completed by that id.

    A character whose bytes span several tokens (byte-level BPE pieces, SentencePiece's <0xNN> byte fallback) is
    held back until its last byte arrives. Concatenating every add() and the final flush() gives the ids' pieces
    joined, as llama.cpp's server streams them: that is tokenizer.decode(ids), except that decode() also does
    what llama.cpp's detokenize does for a whole text (drop SentencePiece's prefix space, clean up spaces).
    """

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False):
        self._tokenizer = tokenizer
        self._skip_special = skip_special
        # The stdlib incremental decoder keeps an incomplete trailing sequence and replaces invalid bytes the same
        # way bytes.decode(errors="replace") does, so streamed and one-shot text agree.
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token_id: int) -> str:
        if self._skip_special and self._tokenizer.is_control(token_id):
            return ""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        """Ends the stream: bytes still waiting for the rest of their character become U+FFFD."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text

    @property
    def pending_bytes(self) -> bytes:
        """Bytes received that do not yet complete a character."""
        return self._utf8.getstate()[0]
