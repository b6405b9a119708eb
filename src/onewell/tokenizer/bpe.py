"""Byte-level BPE (GPT-2 style): bytes are spelled as printable characters, then merged pairwise by rank.

The merge order is llama.cpp's: always the pair with the lowest rank, the leftmost one on ties, re-examining
only the neighbours of each merge (a heap over a linked list, so long words stay O(n log n)).
"""
from __future__ import annotations

from onewell.tokenizer.pair_merge import merge_pairs


def _byte_to_char_table() -> list[str]:
    """GPT-2's map from a byte to the printable character that spells it in vocab and merges."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = [""] * 256
    for b in printable:
        table[b] = chr(b)
    extra = 0
    for b in range(256):
        if not table[b]:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR: list[str] = _byte_to_char_table()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}

# str.translate tables: latin-1 text (one char per byte) <-> GPT-2 spelling, both done in C.
_SPELL = {b: c for b, c in enumerate(BYTE_TO_CHAR)}
_UNSPELL = {ord(c): b for b, c in enumerate(BYTE_TO_CHAR)}


def spell_bytes(data: bytes) -> str:
    """Bytes -> their GPT-2 character spelling."""
    return data.decode("latin-1").translate(_SPELL)


def unspell(text: str) -> bytes:
    """GPT-2 character spelling -> bytes. Characters outside the byte alphabet keep their UTF-8 bytes."""
    plain = text.translate(_UNSPELL)
    try:
        return plain.encode("latin-1")
    except UnicodeEncodeError:
        return b"".join(bytes([CHAR_TO_BYTE[c]]) if c in CHAR_TO_BYTE else c.encode("utf-8") for c in text)


class BytePairEncoder:
    """Encodes one pre-tokenized, byte-spelled word into token ids, with a cache of words already seen."""

    CACHE_LIMIT = 1 << 16

    def __init__(self, token_to_id: dict[str, int], merge_ranks: dict[tuple[str, str], int],
                 ignore_merges: bool = False):
        self._token_to_id = token_to_id
        self._ranks = merge_ranks
        self._ignore_merges = ignore_merges  # Llama 3: a word that is itself a token skips the merges
        self._cache: dict[str, list[int]] = {}

    def encode_word(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            whole = self._token_to_id.get(word) if self._ignore_merges else None
            ids = [whole] if whole is not None else self._ids_of(self._merge(word))
            if len(self._cache) >= self.CACHE_LIMIT:
                self._cache.clear()
            self._cache[word] = ids
        return ids

    def _merge(self, word: str) -> list[str]:
        ranks = self._ranks
        return merge_pairs(list(word), lambda a, b: ranks.get((a, b)))

    def _ids_of(self, parts: list[str]) -> list[int]:
        ids = []
        lookup = self._token_to_id
        for part in parts:
            token_id = lookup.get(part)
            if token_id is not None:
                ids.append(token_id)
                continue
            # A merge result missing from the vocab (an inconsistent file): fall back to its single characters,
            # dropping any that are not tokens either, like llama.cpp's byte fallback.
            ids.extend(lookup[c] for c in part if c in lookup)
        return ids
