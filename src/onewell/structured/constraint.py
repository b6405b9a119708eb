"""One generation's grammar state: masks the logits before sampling, follows the tokens chosen.

Per-token cost on Qwen2.5's 151,936-token vocabulary: the mask is ~50 µs in llguidance plus ~0.1-0.3 ms of
numpy to apply it, against ~12-25 ms for a decode step here, which is why it is computed inline instead of on
a second thread during the native step (docs/structured-output.md has the numbers).
"""
from __future__ import annotations

import numpy as np

from onewell.structured.engine import llguidance
from onewell.structured.grammar import Grammar, GrammarError
from onewell.structured.vocabulary import ll_tokenizer


class ConstraintViolation(RuntimeError):
    """A token outside the mask was fed to the constraint (a bug, not bad input)."""


class Constraint:
    def __init__(self, grammar: Grammar, tokenizer):
        lib = llguidance()
        self.grammar = grammar
        self.n_vocab = tokenizer.n_vocab
        self._matcher = lib.LLMatcher(ll_tokenizer(tokenizer), grammar.text, log_level=0)
        if self._matcher.is_error():
            raise GrammarError(f"the {grammar.source.replace('_', ' ')} cannot be used for constrained decoding: "
                               f"{self._matcher.get_error().strip()}")
        self._words = np.zeros((self.n_vocab + 31) // 32, dtype=np.int32)

    def allowed(self) -> np.ndarray:
        """Boolean mask over the vocabulary: the tokens the grammar allows next (end tokens when it is complete)."""
        self._matcher.unsafe_compute_mask_ptr(self._words.ctypes.data, self._words.nbytes)
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
        if not self._matcher.consume_token(int(token)):
            raise ConstraintViolation(f"token {token} was rejected by the grammar: {self._matcher.get_error()}")

    @property
    def finished(self) -> bool:
        """The grammar is complete and allows nothing more but an end token."""
        return self._matcher.is_stopped()

    @property
    def accepting(self) -> bool:
        """What was generated so far is a complete match (more may still be allowed)."""
        return self._matcher.is_accepting()
