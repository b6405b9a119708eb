"""SentencePiece-style BPE over scored tokens (`tokenizer.ggml.model = "llama"`: Llama 2, Mistral, Phi-3, Gemma 3).

The text is split into characters, then the adjacent pair whose concatenation is the highest-scoring token is
merged, again and again (ties: the leftmost pair) — llama.cpp's llm_tokenizer_spm, a heap over a linked list.
A piece left that is not a token is spelled as byte tokens (<0xNN>), the byte fallback.
"""
from __future__ import annotations

from onewell.tokenizer.pair_merge import merge_pairs

SPACE = "\u2581"  # "▁": how SentencePiece vocabularies spell a space


class SentencePieceEncoder:
    """Encodes one text fragment (spaces already replaced by "▁") into token ids."""

    def __init__(self, token_to_id: dict[str, int], scores: list[float], unk_id: int | None):
        self._token_to_id = token_to_id
        self._scores = scores
        self._unk_id = unk_id
        self._byte_ids = [self._byte_token(b) for b in range(256)]

    def _byte_token(self, b: int) -> int | None:
        # llama.cpp's byte_to_token: "<0xNN>", else the byte itself as a token; we add [UNK] as a last resort
        lookup = self._token_to_id
        found = lookup.get(f"<0x{b:02X}>")
        if found is None:
            found = lookup.get(bytes([b]).decode("utf-8", "surrogateescape"))
        return found if found is not None else self._unk_id

    def encode(self, text: str) -> list[int]:
        lookup, scores = self._token_to_id, self._scores

        def priority(a: str, b: str) -> float | None:  # the higher the merged piece's score, the earlier
            token_id = lookup.get(a + b)
            return None if token_id is None else -scores[token_id]

        ids: list[int] = []
        for piece in merge_pairs(list(text), priority):
            token_id = lookup.get(piece)
            if token_id is not None:
                ids.append(token_id)
            else:  # only a single character that is no token ends here: spell its UTF-8 bytes
                ids.extend(self._byte_ids_of(piece))
        return ids

    def _byte_ids_of(self, piece: str) -> list[int]:
        ids = []
        for b in piece.encode("utf-8", "surrogateescape"):
            token_id = self._byte_ids[b]
            if token_id is None:
                from onewell.tokenizer.tokenizer import TokenizerError

                raise TokenizerError(f"character {piece!r} is not in the vocabulary, which has no byte token "
                                     f"<0x{b:02X}> and no unknown token to stand for it")
            ids.append(token_id)
        return ids
