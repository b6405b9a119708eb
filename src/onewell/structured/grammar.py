"""Grammars for constrained decoding, written as llguidance grammar strings.

Sources: a JSON Schema, "any JSON object", a Lark grammar (llguidance's dialect, which can embed JSON
Schemas with `%json {...}`) or a GBNF grammar (llama.cpp's syntax, translated to Lark by llguidance). Every
grammar is checked before use; a schema that is unsatisfiable or uses an unimplemented keyword raises
GrammarError with llguidance's own explanation.

JSON is generated compact with one space after ',' and ':' and no other whitespace: free whitespace lets
a sampled model wander into endless newlines, and this is what models write anyway.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from onewell.errors import OnewellError
from onewell.structured.engine import llguidance

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
MAX_GRAMMAR_CHARS = 1 << 20


class GrammarError(OnewellError, ValueError):
    """A schema or grammar the engine cannot use: malformed, unsatisfiable, or using something unsupported."""


@dataclass(frozen=True)
class Grammar:
    """A checked llguidance grammar and what it came from (for messages)."""
    source: str   # "json_schema", "json_object", "lark", "gbnf", "tool_call"
    text: str     # the llguidance grammar (JSON-serialized), what LLMatcher takes

    def constraint(self, tokenizer):
        from onewell.structured.constraint import Constraint

        return Constraint(self, tokenizer)


def _check(source: str, grammar: str) -> Grammar:
    lib = llguidance()
    is_error, messages = lib.LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error:
        raise GrammarError(f"the {source.replace('_', ' ')} cannot be used for constrained decoding: "
                           + "; ".join(m.strip() for m in messages))
    return Grammar(source, grammar)


def _schema_dict(schema: Any) -> dict | bool:
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise GrammarError(f"the JSON schema is not valid JSON: {e}") from None
    if isinstance(schema, bool):
        if not schema:
            raise GrammarError("the JSON schema `false` matches nothing (it is unsatisfiable)")
        return schema
    if not isinstance(schema, Mapping):
        raise GrammarError(f"a JSON schema must be an object (or true), got {type(schema).__name__}")
    return dict(schema)


def with_json_options(schema: dict | bool) -> dict:
    """The schema with our JSON formatting options (llguidance reads them from `x-guidance`)."""
    schema = {} if schema is True else dict(schema)
    return {**schema, "x-guidance": {**JSON_OPTIONS, **schema.get("x-guidance", {})}}


def json_schema(schema: Any) -> Grammar:
    """JSON matching `schema` (a dict, or its JSON text)."""
    schema = _schema_dict(schema)
    lib = llguidance()
    try:
        grammar = lib.LLMatcher.grammar_from_json_schema(schema, defaults=JSON_OPTIONS)
    except (ValueError, TypeError) as e:
        raise GrammarError(f"the JSON schema cannot be used: {e}") from None
    return _check("json_schema", grammar)


def json_object() -> Grammar:
    """Any JSON object (OpenAI's response_format {"type": "json_object"})."""
    return json_schema({"type": "object"})


def lark(text: str) -> Grammar:
    if not isinstance(text, str) or not text.strip():
        raise GrammarError("the grammar is empty")
    if len(text) > MAX_GRAMMAR_CHARS:
        raise GrammarError(f"the grammar is longer than {MAX_GRAMMAR_CHARS} characters")
    return _check("lark", llguidance().LLMatcher.grammar_from_lark(text))


def gbnf(text: str) -> Grammar:
    if not isinstance(text, str) or not text.strip():
        raise GrammarError("the grammar is empty")
    from llguidance.gbnf_to_lark import GbnfToLarkError, gbnf_to_lark

    llguidance()  # the friendly error when the package is missing
    try:
        converted = gbnf_to_lark(text)
    except (GbnfToLarkError, Exception) as e:  # the converter raises bare Exception for unknown rules
        raise GrammarError(f"the GBNF grammar does not parse: {e}") from None
    return Grammar("gbnf", lark(converted).text)


def any_grammar(text: str) -> Grammar:
    """Lark when it looks like Lark (a `start:` rule or a %llguidance header), otherwise GBNF (`root ::= ...`)."""
    if not isinstance(text, str) or not text.strip():
        raise GrammarError("the grammar is empty")
    from llguidance.gbnf_to_lark import is_lark_syntax

    return lark(text) if is_lark_syntax(text) else gbnf(text)


def from_response_format(response_format: Mapping[str, Any] | None) -> Grammar | None:
    """OpenAI's response_format: {"type": "text"} (None), "json_object", or "json_schema" with
    {"json_schema": {"name": ..., "schema": {...}, "strict": ...}}."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise GrammarError("response_format must be an object such as {\"type\": \"json_object\"}")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_object()
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping) or "schema" not in spec:
            raise GrammarError('response_format json_schema needs {"json_schema": {"name": ..., "schema": {...}}}')
        return json_schema(spec["schema"])
    raise GrammarError(f"response_format type {kind!r} is not supported (use text, json_object or json_schema)")


def from_options(json_schema_: Any = None, response_format: Any = None, grammar: str | Grammar | None = None
                 ) -> Grammar | None:
    """The one grammar a caller asked for by any of the three ways, or None; more than one is an error."""
    given = [name for name, value in (("json_schema", json_schema_), ("response_format", response_format),
                                      ("grammar", grammar)) if value is not None]
    if len(given) > 1:
        raise GrammarError(f"give only one of {', '.join(given)}: each one constrains the whole reply")
    if json_schema_ is not None:
        return json_schema(json_schema_)
    if response_format is not None:
        return from_response_format(response_format)
    if isinstance(grammar, Grammar):
        return grammar
    if grammar is not None:
        return any_grammar(grammar)
    return None
