"""Constrained decoding with llguidance: grammar sources and their errors, the mask against the vocabulary,
the Python API (`generate(json_schema=...)`, `response_format=`, `grammar=`, `logprobs=`) and
`onewell run --json-schema FILE`, on SmolLM2-135M (small and fast; the server tests use the default model)."""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

import onewell
from onewell import structured
from onewell.cli import main
from onewell.structured.tool_calls import HERMES, LLAMA3_JSON, parse_tool_calls, tool_call_grammar

pytest.importorskip("llguidance")

ITEM = {"type": "object", "additionalProperties": False, "required": ["id", "tags"],
        "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 99},
                       "tags": {"type": "array", "minItems": 1, "maxItems": 2,
                                "items": {"enum": ["red", "green"]}}}}


# --- grammar sources and errors (no model) ------------------------------------------------------------------


@pytest.mark.parametrize("make, fragment", [
    (lambda: structured.json_schema({"type": "integer", "minimum": 3, "maximum": 2}), "Unsatisfiable"),
    (lambda: structured.json_schema({"type": "string", "pattern": "[a-"}), "regex parse error"),
    (lambda: structured.json_schema({"not": {"type": "string"}}), "Unimplemented keys"),
    (lambda: structured.json_schema({"enum": []}), "Unsatisfiable"),
    (lambda: structured.json_schema(False), "unsatisfiable"),
    (lambda: structured.json_schema("{not json"), "not valid JSON"),
    (lambda: structured.json_schema([1, 2]), "must be an object"),
    (lambda: structured.lark("start: missing_rule"), "unknown name"),
    (lambda: structured.lark("  "), "empty"),
    (lambda: structured.gbnf('root ::= "a'), "GBNF grammar does not parse"),
    (lambda: structured.any_grammar("root ::= undefined_rule"), "not found"),
    (lambda: structured.from_response_format({"type": "yaml"}), "not supported"),
    (lambda: structured.from_response_format({"type": "json_schema"}), "json_schema"),
    (lambda: structured.from_options({"type": "object"}, grammar='start: "x"'), "only one of"),
])
def test_bad_schemas_and_grammars_name_the_problem(make, fragment):
    with pytest.raises(structured.GrammarError, match=fragment):
        make()


def test_grammar_sources():
    assert structured.any_grammar('root ::= "yes" | "no"').source == "gbnf"
    assert structured.any_grammar('start: "yes" | "no"').source == "lark"
    assert structured.from_response_format({"type": "text"}) is None
    assert structured.from_response_format({"type": "json_object"}).source == "json_schema"
    assert structured.from_options() is None


def test_tool_call_grammar_refuses_unusable_parameter_schemas():
    bad = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}]
    with pytest.raises(structured.GrammarError, match="parameter schemas"):
        tool_call_grammar(bad, HERMES)
    with pytest.raises(structured.GrammarError, match="no tools"):
        tool_call_grammar([], HERMES)


# --- with a real vocabulary ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol(smollm_path):
    return onewell.load(smollm_path, threads=1, n_ctx=512)


@pytest.mark.model
@pytest.mark.parametrize("background", [False, True])
def test_mask_allows_exactly_the_tokens_that_keep_the_text_valid(smol, background):
    from onewell.structured.constraint import Constraint

    tok = smol.tokenizer
    constraint = Constraint(structured.json_schema({"enum": ["yes", "no"]}), tok, background=background)
    allowed = np.flatnonzero(constraint.allowed())
    assert allowed.size and all(tok.token_bytes(int(i)) in (b'"', b'"y', b'"n', b'"ye', b'"yes', b'"no',
                                                            b'"yes"', b'"no"') for i in allowed)
    logits = np.zeros(tok.n_vocab, dtype=np.float32)
    masked = constraint.mask(logits)
    assert np.isneginf(masked).sum() == tok.n_vocab - allowed.size and np.all(masked[allowed] == 0)
    for t in tok.encode('"yes"', parse_special=False):
        assert constraint.allowed()[t]
        constraint.accept(t)
    assert constraint.finished and constraint.accepting
    ends = np.flatnonzero(constraint.allowed())  # only end-of-generation tokens remain
    assert ends.size and set(ends.tolist()) <= set(tok.eog_ids)
    with pytest.raises(RuntimeError, match="rejected"):
        constraint.accept(tok.encode("x", parse_special=False)[0])


@pytest.mark.model
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generate_with_json_schema_validates_when_sampled(smol, seed):
    out = smol.generate("Give an item as JSON.", chat=True, json_schema=ITEM, max_tokens=60, temperature=1.0,
                        seed=seed)
    jsonschema.validate(json.loads(out), ITEM)
    assert smol.last_stats.stop_reason == "eog"


@pytest.mark.model
def test_the_background_mask_thread_changes_nothing_in_the_tokens(smol, monkeypatch):
    from onewell.structured.constraint import Constraint

    assert Constraint.background_default is True   # the measured default (docs/structured-output.md)
    monkeypatch.setattr(Constraint, "background_default", False)
    inline = smol.generate("Give an item as JSON.", chat=True, json_schema=ITEM, max_tokens=60, temperature=0.9,
                           seed=5)
    monkeypatch.setattr(Constraint, "background_default", True)
    assert smol.generate("Give an item as JSON.", chat=True, json_schema=ITEM, max_tokens=60, temperature=0.9,
                         seed=5) == inline


@pytest.mark.model
def test_response_format_grammar_and_streaming_in_the_python_api(smol):
    fmt = {"type": "json_schema", "json_schema": {"name": "item", "schema": ITEM}}
    pieces = list(smol.generate("An item:", chat=True, response_format=fmt, max_tokens=60, stream=True,
                                temperature=0.8, seed=4))
    assert len(pieces) >= 2
    jsonschema.validate(json.loads("".join(pieces)), ITEM)
    assert smol.generate("Yes or no?", chat=True, grammar='root ::= "yes" | "no"', temperature=1.0) in ("yes", "no")
    # A prompt whose greedy object closes by a clear margin on every kernel path: the bare "{" it replaced chose
    # between '"' and ' "' after '{"The' by a top-2 margin (after the grammar's mask) of 0.04-0.17 nats on
    # generic/avx2/avx512 and 0.0075 on neon-dotprod (qemu), whose trajectory then looped ('{"The ": 2022, ":": ...')
    # past max_tokens: unfinished JSON from a float32-ulp tie, not a grammar bug. This one gives '{"c": 3}' with a
    # smallest masked margin of 1.24-1.52 nats on all five paths (the paths' logits differ by up to ~0.3 nats on
    # SmolLM2).
    few_shot = 'JSON: {"a": 1}\nJSON: {"b": 2}\nJSON:'
    assert isinstance(json.loads(smol.generate(few_shot, response_format={"type": "json_object"}, max_tokens=40,
                                               temperature=0)), dict)
    with pytest.raises(structured.GrammarError):
        smol.generate("x", json_schema={"type": "nope"})


@pytest.mark.model
def test_logprobs_in_the_python_api(smol):
    text = smol.generate("The capital of France is", max_tokens=4, temperature=0, logprobs=3)
    entries = smol.last_logprobs
    assert len(entries) == smol.last_stats.gen_tokens and "".join(e.text for e in entries).startswith(text)
    for e in entries:
        assert e.logprob <= 0 and len(e.top) == 3
        assert e.token == e.top[0][0] and e.logprob == pytest.approx(e.top[0][2])  # greedy: the best one
        assert [lp for _, _, lp in e.top] == sorted((lp for _, _, lp in e.top), reverse=True)
    smol.generate("x", max_tokens=2, temperature=0)
    assert smol.last_logprobs == []
    with pytest.raises(ValueError, match="logprobs"):
        smol.generate("x", logprobs=-1)


@pytest.mark.model
def test_logit_bias_and_penalties_in_the_python_api(smol):
    plain = smol.generate("1, 2, 3,", max_tokens=6, temperature=0)
    first = smol.tokenizer.encode(plain, parse_special=False)[0]
    banned = smol.generate("1, 2, 3,", max_tokens=6, temperature=0, logit_bias={first: -100})
    assert smol.tokenizer.encode(banned, parse_special=False)[0] != first
    repeated = smol.generate("Repeat forever: la la la la", max_tokens=12, temperature=0)
    penalized = smol.generate("Repeat forever: la la la la", max_tokens=12, temperature=0, frequency_penalty=2.0)
    assert penalized != repeated


@pytest.mark.model
def test_tool_grammar_forces_a_hermes_call_even_on_a_model_without_tools(smol):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "required": ["a", "b"], "additionalProperties": False,
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
    for fmt in (HERMES, LLAMA3_JSON):
        out = smol.chat([{"role": "user", "content": "add 2 and 3"}], grammar=tool_call_grammar(tools, fmt, False),
                        max_tokens=60, temperature=0.7, seed=1)
        _, calls = parse_tool_calls(out, fmt, ["add"])
        assert len(calls) == 1 and set(json.loads(calls[0].arguments)) == {"a", "b"}


@pytest.mark.model
def test_cli_run_with_a_json_schema_file(tmp_path, smollm_path, capsys):
    path = tmp_path / "item.json"
    path.write_text(json.dumps(ITEM))
    assert main(["run", str(smollm_path), "An item as JSON:", "--json-schema", str(path), "-n", "60",
                 "--temp", "0.7", "--threads", "1"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), ITEM)
    path.write_text('{"type": "integer", "minimum": 2, "maximum": 1}')
    assert main(["run", str(smollm_path), "x", "--json-schema", str(path)]) == 1
    err = capsys.readouterr().err
    assert "item.json" in err and "Unsatisfiable" in err
