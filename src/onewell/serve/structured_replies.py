"""What the server adds for structured output and tools: the grammar a request asks for (response_format,
grammar, json_schema, or a forced tool call), its per-request constraint, and the reply shaper that turns the
model's text into OpenAI's content and tool_calls (whole, or as stream deltas)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from onewell import structured
from onewell.serve.openai_schema import ChatCompletionRequest
from onewell.structured.tool_calls import ToolCall, ToolCallStream, tool_call_grammar, tool_format


class StructuredRequestError(ValueError):
    """A request whose schema, grammar or tools cannot be used; the server answers 400 with this message."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ToolMode:
    fmt: str                 # structured.tool_calls.HERMES or LLAMA3_JSON
    names: frozenset[str]    # the tools offered: calls to others are not calls


def tool_mode(model: Any, req: ChatCompletionRequest) -> ToolMode | None:
    tools = req.active_tools()
    if not tools:
        return None
    fmt = tool_format(model.tokenizer.chat_template)
    if fmt is None:
        raise StructuredRequestError("this model's chat template does not render tools, so it cannot call them",
                                     param="tools")
    return ToolMode(fmt, frozenset(t.function.name for t in tools))


def request_grammar(req, mode: ToolMode | None) -> structured.Grammar | None:
    """The grammar the reply must match, or None. Raises StructuredRequestError naming the problem."""
    try:
        if isinstance(req, ChatCompletionRequest):
            forced = req.forced_tools()
            if forced:
                return tool_call_grammar([t.for_template() for t in forced], mode.fmt, req.parallel_tool_calls)
        return structured.from_options(req.json_schema, req.response_format_dict(), req.grammar)
    except structured.GrammarError as e:
        param = ("tools" if isinstance(req, ChatCompletionRequest) and req.forced_tools() else
                 "response_format" if req.response_format is not None else
                 "grammar" if req.grammar is not None else "json_schema")
        raise StructuredRequestError(str(e), param=param) from None
    except structured.StructuredOutputUnavailable as e:
        raise StructuredRequestError(str(e)) from None


async def constraint_for(model: Any, grammar: structured.Grammar | None):
    """A fresh constraint on a worker thread: the first one builds the vocabulary table (seconds for 150k
    tokens), and a complex grammar takes a while to compile; neither may stall the event loop."""
    if grammar is None:
        return None
    try:
        return await asyncio.to_thread(grammar.constraint, model.tokenizer)
    except structured.GrammarError as e:
        raise StructuredRequestError(str(e), param=grammar.source) from None


class ReplyShaper:
    """Chat reply text -> OpenAI message / deltas. Without tools the text passes through unchanged."""

    def __init__(self, mode: ToolMode | None):
        self._stream = ToolCallStream(mode.fmt, mode.names) if mode is not None else None

    @property
    def called(self) -> bool:
        return bool(self._stream and self._stream.calls)

    def push(self, text: str) -> list[dict[str, Any]]:
        if self._stream is None:
            return [{"content": text}] if text else []
        return self._deltas(self._stream.push(text))

    def finish(self) -> list[dict[str, Any]]:
        return self._deltas(self._stream.finish()) if self._stream is not None else []

    def finish_reason(self, reason: str) -> str:
        return "tool_calls" if self.called else reason

    def _deltas(self, pieces: list[str | ToolCall]) -> list[dict[str, Any]]:
        out = []
        for piece in pieces:
            if isinstance(piece, ToolCall):
                out.append({"tool_calls": [piece.as_openai(index=self._stream.calls.index(piece))]})
            elif piece:
                out.append({"content": piece})
        return out

    def message(self, text: str) -> dict[str, Any]:
        """The whole reply as an assistant message."""
        if self._stream is None:
            return {"role": "assistant", "content": text}
        pieces = self._stream.push(text) + self._stream.finish()
        content = "".join(p for p in pieces if isinstance(p, str))
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if self._stream.calls:
            message["tool_calls"] = [call.as_openai() for call in self._stream.calls]
        return message
