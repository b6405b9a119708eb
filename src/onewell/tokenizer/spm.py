"""SentencePiece-style BPE over scored tokens (`tokenizer.ggml.model = "llama"`: Llama 2, Mistral, Phi-3, Gemma 3).

The text is split into characters, then the adjacent pair whose concatenation is the highest-scoring token is
merged, again and again (ties: the leftmost pair) — llama.cpp's llm_tokenizer_spm, a heap over a linked list.
A piece left that is not a token is spelled as byte tokens (<0xNN>), the byte fallback.
"""
from __future__ import annotations

import heapq

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
        symbols = list(text)
        n = len(symbols)
        if n == 0:
            return []
        lookup, scores = self._token_to_id, self._scores
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        heap = []
        for i in range(n - 1):
            merged = symbols[i] + symbols[i + 1]
            token_id = lookup.get(merged)
            if token_id is not None:
                heap.append((-scores[token_id], i, i + 1, merged))
        heapq.heapify(heap)

        def push(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            merged = symbols[left] + symbols[right]
            token_id = lookup.get(merged)
            if token_id is not None:
                heapq.heappush(heap, (-scores[token_id], left, right, merged))

        while heap:
            _, left, right, merged = heapq.heappop(heap)
            a, b = symbols[left], symbols[right]
            # Stale entry: one side was merged away (emptied) or grew since the pair was queued.
            if not a or not b or len(a) + len(b) != len(merged):
                continue
            symbols[left] = merged
            symbols[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prv[nxt[right]] = left
            push(prv[left], left)
            push(left, nxt[left])

        ids: list[int] = []
        for piece in symbols:
            if not piece:
                continue
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
