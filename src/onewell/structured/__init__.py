"""Constrained decoding (structured output) with the llguidance grammar engine.

    grammar = structured.json_schema({"type": "object", ...})   # or json_object(), lark(...), gbnf(...)
    constraint = grammar.constraint(tokenizer)                   # one per generation
    logits = constraint.mask(logits); token = sample(logits); constraint.accept(token)

llguidance is an optional dependency (`pip install 'onewell[structured]'`); without it these raise
StructuredOutputUnavailable naming the package.
"""
from onewell.structured.engine import StructuredOutputUnavailable
from onewell.structured.grammar import (Grammar, GrammarError, any_grammar, from_options, from_response_format, gbnf,
                                        json_object, json_schema, lark)

__all__ = ["Grammar", "GrammarError", "StructuredOutputUnavailable", "any_grammar", "from_options",
           "from_response_format", "gbnf", "json_object", "json_schema", "lark"]
