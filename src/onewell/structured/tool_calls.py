"""Tool calls in model output: which format a chat template teaches, reading calls out of the reply (whole or
streamed), and the grammar that forces a call when the client requires one.

Formats:
- "hermes" (Qwen2.5, Hermes, ...): `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per
  call, possibly after some text.
- "llama3_json" (Llama 3.1-3.3): the whole reply is `{"name": "f", "parameters": {...}}`, possibly after
  `<|python_tag|>`.

Malformed output (a block that is not JSON, lacks a name, or names a tool that was not offered) is not a call:
it stays in the reply's text, so nothing the model wrote is lost.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from onewell.structured.grammar import Grammar, GrammarError, lark, with_json_options

HERMES = "hermes"
LLAMA3_JSON = "llama3_json"
OPEN, CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"


def tool_format(chat_template: str | None) -> str | None:
    """The tool-call format a chat template teaches the model, or None when it does not render tools."""
    if not chat_template or "tools" not in chat_template:
        return None
    if OPEN in chat_template:
        return HERMES
    if PYTHON_TAG in chat_template or "parameters" in chat_template:
        return LLAMA3_JSON
    return None


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text of an object, as OpenAI sends it
    id: str = field(default_factory=lambda: "call_" + uuid.uuid4().hex[:24])

    def as_openai(self, index: int | None = None) -> dict[str, Any]:
        call: dict[str, Any] = {"id": self.id, "type": "function",
                                "function": {"name": self.name, "arguments": self.arguments}}
        return call if index is None else {"index": index, **call}


def _call_from_json(text: str, names: frozenset[str] | None, arguments_keys: Sequence[str]) -> ToolCall | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    if names is not None and data["name"] not in names:
        return None
    args: Any = {}
    for key in arguments_keys:
        if key in data:
            args = data[key]
            break
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(data["name"], json.dumps(args, ensure_ascii=False))


class ToolCallStream:
    """Feed the reply's text as it arrives; get back what may be sent: text (str) and finished ToolCalls.

    Text that could be the start of a call is held until it is clear; leading and trailing whitespace of the
    text is dropped (what remains is what a client shows). `finish()` ends the reply."""

    def __init__(self, fmt: str, tool_names: Iterable[str] | None = None):
        if fmt not in (HERMES, LLAMA3_JSON):
            raise ValueError(f"unknown tool-call format {fmt!r}")
        self.fmt = fmt
        self.names = frozenset(tool_names) if tool_names is not None else None
        self.calls: list[ToolCall] = []
        self._buf = ""
        self._in_call = False
        self._started = False  # non-whitespace text was sent already
        self._space = ""       # whitespace held until text follows it
        self._whole: bool | None = None  # llama3_json: is the reply one JSON call (None: not known yet)

    def push(self, text: str) -> list[str | ToolCall]:
        self._buf += text
        return self._hermes(final=False) if self.fmt == HERMES else self._llama3(final=False)

    def finish(self) -> list[str | ToolCall]:
        return self._hermes(final=True) if self.fmt == HERMES else self._llama3(final=True)

    # -- text out, whitespace trimmed ---------------------------------------------------------------------

    def _text(self, text: str, out: list) -> None:
        if not text:
            return
        if not self._started:
            text = text.lstrip()
            if not text:
                return
        body = text.rstrip()
        if body:
            out.append(self._space + body)
            self._started = True
            self._space = text[len(body):]
        else:
            self._space += text

    def _call(self, call: ToolCall, out: list) -> None:
        self.calls.append(call)
        out.append(call)

    # -- hermes -------------------------------------------------------------------------------------------

    def _hermes(self, final: bool) -> list[str | ToolCall]:
        out: list[str | ToolCall] = []
        while True:
            if not self._in_call:
                at = self._buf.find(OPEN)
                if at >= 0:
                    self._text(self._buf[:at], out)
                    self._buf, self._in_call = self._buf[at + len(OPEN):], True
                    continue
                keep = 0 if final else _partial_suffix(self._buf, OPEN)
                self._text(self._buf[:len(self._buf) - keep], out)
                self._buf = self._buf[len(self._buf) - keep:]
                return out
            end = self._buf.find(CLOSE)
            if end < 0 and not final:
                return out
            block = self._buf if end < 0 else self._buf[:end]
            call = _call_from_json(block.strip(), self.names, ("arguments", "parameters"))
            if call is not None:
                self._call(call, out)
            else:
                self._text(OPEN + block + (CLOSE if end >= 0 else ""), out)
            self._buf = "" if end < 0 else self._buf[end + len(CLOSE):]
            self._in_call = False

    # -- llama 3 json -------------------------------------------------------------------------------------

    def _llama3(self, final: bool) -> list[str | ToolCall]:
        out: list[str | ToolCall] = []
        if self._whole is None:
            head = self._buf.lstrip()
            if head.startswith(PYTHON_TAG):
                head = head[len(PYTHON_TAG):].lstrip()
            if head[:1] == "{":
                self._whole = True
            elif head and not PYTHON_TAG.startswith(head):
                self._whole = False
            elif not final:
                return out
        if self._whole is False or (self._whole is None and final):
            self._text(self._buf, out)
            self._buf = ""
            return out
        if not final:
            return out
        text = self._buf.strip()
        if text.startswith(PYTHON_TAG):
            text = text[len(PYTHON_TAG):].strip()
        calls = []
        for piece in _json_values(text):
            call = _call_from_json(piece, self.names, ("parameters", "arguments"))
            if call is None:
                calls = None
                break
            calls.append(call)
        if calls:
            for call in calls:
                self._call(call, out)
        else:
            self._text(self._buf, out)
        self._buf = ""
        return out


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def _json_values(text: str) -> list[str]:
    """Consecutive JSON values separated by whitespace or ';' (Llama writes parallel calls that way); a text
    that is not entirely such values gives [text] (which then fails to parse as one call)."""
    decoder, pos, pieces = json.JSONDecoder(), 0, []
    while pos < len(text):
        try:
            _, end = decoder.raw_decode(text, pos)
        except ValueError:
            return [text]
        pieces.append(text[pos:end])
        pos = end
        while pos < len(text) and text[pos] in " \t\r\n;":
            pos += 1
    return pieces or [text]


def parse_tool_calls(text: str, fmt: str, tool_names: Iterable[str] | None = None) -> tuple[str | None, list[ToolCall]]:
    """(the reply's text without its calls, or None if nothing is left; the calls), as a whole reply."""
    stream = ToolCallStream(fmt, tool_names)
    pieces = stream.push(text) + stream.finish()
    content = "".join(p for p in pieces if isinstance(p, str))
    return (content or None), stream.calls


# ----------------------------------------------------------------------------------------------------------
# Forcing a call (tool_choice "required" or a named function)


def _function(tool: dict) -> dict:
    return tool.get("function", tool)


def call_schema(tools: Sequence[dict], fmt: str) -> dict:
    """JSON Schema of one call to any of `tools` in the model's format."""
    key = "arguments" if fmt == HERMES else "parameters"
    options = []
    for tool in tools:
        fn = _function(tool)
        params = fn.get("parameters") or {"type": "object"}
        options.append({"type": "object", "properties": {"name": {"const": fn["name"]}, key: params},
                        "required": ["name", key], "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


def tool_call_grammar(tools: Sequence[dict], fmt: str, parallel: bool = True) -> Grammar:
    """A reply that is nothing but calls (one, or one or more when `parallel`) to the given tools."""
    if not tools:
        raise GrammarError("no tools to call")
    schema = json.dumps(with_json_options(call_schema(tools, fmt)), ensure_ascii=False)
    if fmt == HERMES:
        call = f'"{OPEN}\\n" %json {schema} "\\n{CLOSE}"'
        rule = 'start: call ("\\n" call)*\n' if parallel else "start: call\n"
        grammar = rule + f"call: {call}\n"
    elif fmt == LLAMA3_JSON:
        grammar = f"start: %json {schema}\n"
    else:
        raise GrammarError(f"unknown tool-call format {fmt!r}")
    try:
        checked = lark(grammar)
    except GrammarError as e:
        raise GrammarError(f"the tools' parameter schemas cannot be enforced: {e}") from None
    return Grammar("tool_call", checked.text)
