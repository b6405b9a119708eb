"""Text release for streamed replies: stop strings held back token-accurately, and server-sent events.

A stop string can arrive split over several tokens, so text that might be the start of one is held until
the next token shows it is not (StopStringFilter in runtime/generate.py). Here each token's logprob entry
travels with its text: an entry is released once its text is released, so a client never sees logprobs of
tokens whose text was withheld, nor text without its logprobs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from onewell.runtime.generate import StopStringFilter


@dataclass(frozen=True)
class Alternative:
    token: str
    logprob: float
    bytes: tuple[int, ...]

    def as_openai(self) -> dict[str, Any]:
        return {"token": self.token, "logprob": self.logprob, "bytes": list(self.bytes)}


@dataclass(frozen=True)
class TokenLogprob(Alternative):
    top: tuple[Alternative, ...] = ()

    def as_openai(self) -> dict[str, Any]:
        return {**super().as_openai(), "top_logprobs": [alt.as_openai() for alt in self.top]}


@dataclass
class Release:
    """What may be sent now: text, and the logprob entries of the tokens that produced it."""
    text: str = ""
    logprobs: list[TokenLogprob] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.text or self.logprobs)


class StopHoldback:
    """Feed (text, logprob) per token; get back what is safe to send. `stopped` turns True at a stop string."""

    def __init__(self, stop: Sequence[str]):
        self._filter = StopStringFilter(stop)
        self._received = 0   # characters fed so far
        self._released = 0   # characters released so far
        self._waiting: list[tuple[int, int, TokenLogprob]] = []  # (start, end) offsets of unreleased tokens

    @property
    def stopped(self) -> bool:
        return self._filter.stopped

    def push(self, text: str, logprob: TokenLogprob | None = None) -> Release:
        if self.stopped:
            return Release()
        start = self._received
        self._received += len(text)
        if logprob is not None:
            self._waiting.append((start, self._received, logprob))
        out = self._filter.push(text)
        self._released += len(out)
        # At a stop, a token whose text was partly sent goes out with it; the rest are dropped below.
        return Release(out, self._take(partial=self.stopped))

    def finish(self, tail: str = "") -> Release:
        """End of generation: `tail` is the decoder's last text; everything still held is released."""
        release = self.push(tail)
        if self.stopped:
            return release
        out = self._filter.flush()
        self._released += len(out)
        release.text += out
        release.logprobs += self._take(partial=True)
        return release

    def _take(self, partial: bool) -> list[TokenLogprob]:
        done = []
        while self._waiting:
            start, end, entry = self._waiting[0]
            fully = end <= self._released
            if not (fully or (partial and start < self._released)):
                break
            done.append(entry)
            self._waiting.pop(0)
        if self.stopped:
            self._waiting.clear()
        return done


# ----------------------------------------------------------------------------------------------------------
# Server-sent events


def sse(payload: dict[str, Any]) -> bytes:
    """One `data:` event; JSON on a single line (it never contains a raw newline) ends the event."""
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
