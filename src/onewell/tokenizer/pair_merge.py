"""The merge loop BPE and SentencePiece share: repeatedly join the adjacent pair of symbols with the best
priority until no pair has one. A heap of candidate pairs over a doubly linked list of symbols makes it
O(n log n) in the word length instead of rescanning the word after every merge."""
from __future__ import annotations

import heapq
from typing import Callable


def merge_pairs(symbols: list[str], priority: Callable[[str, str], float | None]) -> list[str]:
    """Merge adjacent symbols in order of `priority(left, right)` (lower first; None: never merge; ties go to
    the leftmost pair) and return the symbols left. `symbols` is consumed."""
    n = len(symbols)
    if n < 2:
        return symbols
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap: list[tuple[float, int, int, str]] = []

    def candidate(left: int, right: int) -> tuple[float, int, int, str] | None:
        rank = priority(symbols[left], symbols[right])
        return None if rank is None else (rank, left, right, symbols[left] + symbols[right])

    heap = [c for c in (candidate(i, i + 1) for i in range(n - 1)) if c is not None]
    heapq.heapify(heap)

    def push(left: int, right: int) -> None:
        if left >= 0 and right >= 0 and (c := candidate(left, right)) is not None:
            heapq.heappush(heap, c)

    while heap:
        _, left, right, merged = heapq.heappop(heap)
        a, b = symbols[left], symbols[right]
        # Stale entry: one side was merged away (emptied) or changed since the pair was queued.
        if not a or not b or a + b != merged:
            continue
        symbols[left] = merged
        symbols[right] = ""
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prv[nxt[right]] = left
        push(prv[left], left)
        push(left, nxt[left])
    return [s for s in symbols if s]
