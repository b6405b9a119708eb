"""Chat templates (`tokenizer.chat_template`): Jinja rendered the way Hugging Face transformers renders them.

Same environment as transformers' apply_chat_template: sandboxed and immutable, trim_blocks and lstrip_blocks,
the loopcontrols extension, `raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII text, and the
`{% generation %}` block (rendered as its plain content). Unlike transformers, a render runs under limits of
time, sizes and output (template_sandbox.py): a template is data from the model file. A template is compiled
once (a failure to compile too) and cached.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2 import nodes

from onewell.errors import OnewellError
from onewell.tokenizer.template_sandbox import (Budget, LimitedSandbox, TemplateBudgetError, TemplateLimits,
                                                budget_scope)


class ChatTemplateError(OnewellError, ValueError):
    """A chat template that does not compile, fails while rendering, or rejects the conversation."""


class MissingChatTemplateError(ChatTemplateError):
    """A chat request for a model whose file carries no chat template."""


def require_chat_template(template: str | None, model: str = "this model") -> str:
    """Returns the template, or raises MissingChatTemplateError when a chat request cannot be formatted."""
    if not template or not template.strip():
        raise MissingChatTemplateError(
            f"{model} has no chat template (tokenizer.chat_template is missing from its GGUF metadata), "
            "so chat messages cannot be formatted; send a plain text prompt instead")
    return template


def _raise_exception(message: str):
    raise ChatTemplateError(f"the chat template rejected the conversation: {message}")


def _tojson(value, ensure_ascii: bool = False, indent=None, separators=None, sort_keys: bool = False) -> str:
    # Jinja's own tojson escapes HTML characters; templates expect plain JSON.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering ignores it."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _environment() -> LimitedSandbox:
    env = LimitedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.finish_filters()
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@functools.lru_cache(maxsize=16)
def _compile_or_error(template: str) -> jinja2.Template | ChatTemplateError:
    """Compiles once per template text; a template that does not compile is remembered as its error."""
    try:
        with budget_scope(Budget(TemplateLimits(max_seconds=10.0))):  # compiling folds constants
            return _environment().from_string(template)
    except jinja2.TemplateSyntaxError as e:
        return ChatTemplateError(f"chat template does not compile: {e.message} (line {e.lineno})")
    except Exception as e:  # RecursionError on deep nesting, ...
        return ChatTemplateError(f"chat template does not compile: {type(e).__name__}: {e}")


def _compile(template: str) -> jinja2.Template:
    compiled = _compile_or_error(template)
    if isinstance(compiled, ChatTemplateError):
        raise ChatTemplateError(str(compiled))
    return compiled


def _input_chars(messages, extra) -> int:
    """Characters the conversation brings: the output budget grows with it, so long chats are not refused."""
    try:
        return len(json.dumps([messages, extra], default=str))
    except (TypeError, ValueError, RecursionError):
        return 0


def _render_limited(compiled: jinja2.Template, limits: TemplateLimits, input_chars: int, variables: dict) -> str:
    budget = Budget(limits, input_chars)
    parts: list[str] = []
    size = 0
    with budget_scope(budget):
        for piece in compiled.generate(**variables):
            size += len(piece)
            budget.size(size, "the rendered prompt")
            budget.tick()
            parts.append(piece)
    return "".join(parts)


def render_chat(
    template: str,
    messages: list[dict],
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    limits: TemplateLimits | None = None,
    **extra,
) -> str:
    """Renders a conversation into the prompt text the model was trained on.

    `extra` becomes template variables too (e.g. `tools=[...]`, `documents=[...]`); `tools` and `documents`
    are None unless given, as in transformers. `limits` bounds the render (TemplateLimits() by default); any
    failure, a limit included, is a ChatTemplateError.
    """
    if not isinstance(template, str):
        raise ChatTemplateError(f"chat template must be a str, not {type(template).__name__}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatTemplateError("messages must be a list of {'role': ..., 'content': ...} dicts")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"message {i} must be a dict with 'role' and 'content', got {message!r}")
    compiled = _compile(template)
    variables = {"tools": None, "documents": None, **extra}
    try:
        return _render_limited(compiled, limits or TemplateLimits(), _input_chars(messages, extra), dict(
            messages=list(messages), add_generation_prompt=add_generation_prompt,
            bos_token=bos_token, eos_token=eos_token, **variables))
    except ChatTemplateError:
        raise
    except TemplateBudgetError as e:
        raise ChatTemplateError(f"chat template stopped: {e}") from None
    except Exception as e:  # the template is data from the model file: any failure in it is the template's
        raise ChatTemplateError(f"chat template failed while rendering: {type(e).__name__}: {e}") from e
