"""One generation's grammar state: masks the logits before sampling, follows the tokens chosen.

Per-token cost on Qwen2.5's 151,936-token vocabulary: the mask is ~50 µs in llguidance plus ~0.1-0.3 ms of
numpy to apply it, against ~12-25 ms for a decode step here. By default (background=True) the next mask is
computed on a helper thread right after accept(), while the caller runs the native step of that token (both
release the GIL): measured by benchmarks/structured_overhead.py, it removed the ~8 % an inline mask cost
(docs/structured-output.md, docs/perf-log.md entry 12). background=False computes it inline.
"""
from __future__ import annotations

import concurrent.futures
import threading

import numpy as np

from onewell.structured.engine import llguidance
from onewell.structured.grammar import Grammar, GrammarError
from onewell.structured.vocabulary import ll_tokenizer

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _mask_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="onewell-mask")
        return _pool


class ConstraintViolation(RuntimeError):
    """A token outside the mask was fed to the constraint (a bug, not bad input)."""


class Constraint:
    background_default = True  # what `background=None` means; the benchmark sets it per variant

    def __init__(self, grammar: Grammar, tokenizer, background: bool | None = None):
        lib = llguidance()
        self.grammar = grammar
        self.n_vocab = tokenizer.n_vocab
        self.background = self.background_default if background is None else background
        self._matcher = lib.LLMatcher(ll_tokenizer(tokenizer), grammar.text, log_level=0)
        if self._matcher.is_error():
            raise GrammarError(f"the {grammar.source.replace('_', ' ')} cannot be used for constrained decoding: "
                               f"{self._matcher.get_error().strip()}")
        self._words = np.zeros((self.n_vocab + 31) // 32, dtype=np.int32)
        self._pending: concurrent.futures.Future | None = None  # the next mask, being computed
        self._finished = False

    def _compute_words(self) -> None:
        self._matcher.unsafe_compute_mask_ptr(self._words.ctypes.data, self._words.nbytes)

    def _wait(self) -> bool:
        """Joins a background computation; True if the words now hold the next mask."""
        pending, self._pending = self._pending, None
        if pending is None:
            return False
        pending.result()
        return True

    def allowed(self) -> np.ndarray:
        """Boolean mask over the vocabulary: the tokens the grammar allows next (end tokens when it is complete)."""
        if not self._wait():
            self._compute_words()
        return np.unpackbits(self._words.view(np.uint8), bitorder="little")[:self.n_vocab].view(bool)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        """A copy of the logits with every token the grammar forbids at -inf."""
        logits = np.asarray(logits, dtype=np.float32).reshape(-1)
        allowed = self.allowed()
        if len(logits) != len(allowed):
            allowed = np.pad(allowed, (0, max(0, len(logits) - len(allowed))))[:len(logits)]
        ids = np.flatnonzero(allowed)
        if ids.size == 0:
            raise ConstraintViolation(f"the grammar allows no token: {self._matcher.get_error() or 'dead end'}")
        out = np.full(len(logits), -np.inf, dtype=np.float32)  # filling and copying the allowed few beats np.where
        out[ids] = logits[ids]
        return out

    def accept(self, token: int) -> None:
        self._wait()  # the matcher is never used from two threads at once
        if not self._matcher.consume_token(int(token)):
            raise ConstraintViolation(f"token {token} was rejected by the grammar: {self._matcher.get_error()}")
        self._finished = self._matcher.is_stopped()
        if self.background and not self._finished:
            self._pending = _mask_pool().submit(self._compute_words)

    @property
    def finished(self) -> bool:
        """The grammar is complete and allows nothing more but an end token."""
        return self._finished

    @property
    def accepting(self) -> bool:
        """What was generated so far is a complete match (more may still be allowed)."""
        self._wait()
        return self._matcher.is_accepting()
