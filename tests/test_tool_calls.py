"""Reading tool calls out of model output (Qwen/Hermes `<tool_call>` blocks, Llama 3 JSON), whole and streamed,
including malformed output, and the OpenAI request/response shapes around them. No model needed."""
from __future__ import annotations

import json

import pytest

from onewell.serve import openai_schema as schema
from onewell.serve.openai_structured import unsupported_fields
from onewell.serve.structured_replies import ReplyShaper, ToolMode
from onewell.structured.tool_calls import (HERMES, LLAMA3_JSON, ToolCall, ToolCallStream, parse_tool_calls,
                                           tool_format)

NAMES = ["get_weather", "add"]
TWO_CALLS = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>')


def test_hermes_blocks_become_calls_and_the_text_stays_content():
    content, calls = parse_tool_calls(TWO_CALLS, HERMES, NAMES)
    assert content == "Let me check."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"}),
                                                                  ("add", {"a": 1, "b": 2})]
    assert len({c.id for c in calls}) == 2 and all(c.id.startswith("call_") for c in calls)


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>',       # not JSON
    '<tool_call>\n{"arguments": {"a": 1}}\n</tool_call>',                        # no name
    '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>',             # not an offered tool
    '<tool_call>\n{"name": "add", "arguments": [1, 2]}\n</tool_call>',           # arguments not an object
    '<tool_call>\n["add"]\n</tool_call>',                                          # not an object at all
    '<tool_call>\n{"name": "add", "arguments": {"a"',                              # cut off mid-call
])
def test_malformed_calls_are_not_calls_and_nothing_is_lost(text):
    content, calls = parse_tool_calls(text, HERMES, NAMES)
    assert calls == []
    assert content == text.strip()


def test_arguments_sent_as_a_json_string_and_an_unclosed_final_block_are_accepted():
    text = '<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 3, \\"b\\": 4}"}'
    content, calls = parse_tool_calls(text, HERMES, NAMES)
    assert content is None and json.loads(calls[0].arguments) == {"a": 3, "b": 4}


def test_plain_text_is_untouched():
    assert parse_tool_calls("  The weather is fine <tool> indeed.  ", HERMES, NAMES) == (
        "The weather is fine <tool> indeed.", [])


def test_streaming_split_anywhere_gives_the_whole_reply():
    whole_content, whole_calls = parse_tool_calls(TWO_CALLS, HERMES, NAMES)
    for cut in range(1, len(TWO_CALLS)):
        for step in (cut, 1):
            stream = ToolCallStream(HERMES, NAMES)
            pieces = []
            for i in range(0, len(TWO_CALLS), step):
                pieces += stream.push(TWO_CALLS[i:i + step])
            pieces += stream.finish()
            text = "".join(p for p in pieces if isinstance(p, str))
            calls = [p for p in pieces if isinstance(p, ToolCall)]
            assert text == whole_content
            assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole_calls]
        if cut > 40:
            break


def test_streaming_holds_back_a_possible_call_start_but_no_more():
    stream = ToolCallStream(HERMES, NAMES)
    assert stream.push("Hello <tool") == ["Hello"]      # "<tool" might open a call; trailing space held too
    assert stream.push("box> here") == [" <toolbox> here"]
    assert stream.finish() == []


def test_llama3_json_calls():
    text = '<|python_tag|>{"name": "add", "parameters": {"a": 1, "b": 2}}'
    content, calls = parse_tool_calls(text, LLAMA3_JSON, NAMES)
    assert content is None and (calls[0].name, json.loads(calls[0].arguments)) == ("add", {"a": 1, "b": 2})
    _, calls = parse_tool_calls('{"name": "add", "parameters": {"a": 1, "b": 2}}; {"name": "get_weather", '
                                '"parameters": {"city": "Rome"}}', LLAMA3_JSON, NAMES)
    assert [c.name for c in calls] == ["add", "get_weather"]
    for text in ('{"name": "add", "parameters": {"a": 1', '{"answer": 42}', "Just text, no call."):
        assert parse_tool_calls(text, LLAMA3_JSON, NAMES) == (text, [])


def test_tool_format_from_the_chat_template():
    assert tool_format("{% if tools %}<tool_call>{% endif %}") == HERMES
    assert tool_format('{% if tools %}{"name": ..., "parameters": ...}<|python_tag|>{% endif %}') == LLAMA3_JSON
    assert tool_format("{{ messages }}") is None and tool_format(None) is None


def test_reply_shaper_message_and_deltas():
    shaper = ReplyShaper(ToolMode(HERMES, frozenset(NAMES)))
    message = shaper.message(TWO_CALLS)
    assert message["content"] == "Let me check." and len(message["tool_calls"]) == 2
    assert message["tool_calls"][1]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    assert shaper.finish_reason("stop") == "tool_calls"
    streamed = ReplyShaper(ToolMode(HERMES, frozenset(NAMES)))
    deltas = streamed.push(TWO_CALLS) + streamed.finish()
    assert [d["tool_calls"][0]["index"] for d in deltas if "tool_calls" in d] == [0, 1]
    plain = ReplyShaper(None)
    assert plain.message(" as is ") == {"role": "assistant", "content": " as is "}
    assert plain.finish_reason("length") == "length"


def test_history_with_tool_calls_renders_arguments_as_objects():
    req = schema.ChatCompletionRequest.model_validate({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "1"}]})
    assistant, tool = req.messages[1].for_template(), req.messages[2].for_template()
    assert assistant["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 1}}
    assert assistant["content"] == "" and tool == {"role": "tool", "content": "1", "tool_call_id": "call_1"}
    bad = schema.ChatCompletionRequest.model_validate({"messages": [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": "{oops"}}]}]})
    with pytest.raises(ValueError, match="not JSON"):
        bad.messages[0].for_template()


def test_tool_choice_selects_the_tools():
    tools = [{"type": "function", "function": {"name": n}} for n in NAMES]
    base = {"messages": [{"role": "user", "content": "x"}], "tools": tools}
    req = schema.ChatCompletionRequest.model_validate(base)
    assert [t.function.name for t in req.active_tools()] == NAMES and req.forced_tools() == []
    req = schema.ChatCompletionRequest.model_validate({**base, "tool_choice": "none"})
    assert req.active_tools() == [] and req.forced_tools() == []
    req = schema.ChatCompletionRequest.model_validate({**base, "tool_choice": "required"})
    assert len(req.forced_tools()) == 2
    req = schema.ChatCompletionRequest.model_validate(
        {**base, "tool_choice": {"type": "function", "function": {"name": "add"}}})
    assert [t.function.name for t in req.forced_tools()] == ["add"]
    with pytest.raises(ValueError, match="cannot both"):
        schema.ChatCompletionRequest.model_validate({**base, "tool_choice": "required",
                                                     "response_format": {"type": "json_object"}})


def test_unsupported_fields_are_named_and_harmless_values_pass():
    assert unsupported_fields({"user": "x", "metadata": {}, "store": False, "modalities": ["text"]}) == []
    problems = unsupported_fields({"store": True, "audio": {}, "functions": [{"name": "f"}], "best_of": 3})
    assert sorted(p.split(":")[0] for p in problems) == ["audio", "best_of", "functions", "store"]


def test_tools_for_a_model_whose_template_cannot_render_them_are_refused():
    from types import SimpleNamespace

    from onewell.serve.structured_replies import StructuredRequestError, tool_mode

    tools = [{"type": "function", "function": {"name": "add"}}]
    req = schema.ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "x"}], "tools": tools})
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    plain = SimpleNamespace(tokenizer=SimpleNamespace(chat_template=template))
    with pytest.raises(StructuredRequestError, match="does not render tools"):
        tool_mode(plain, req)
    none = schema.ChatCompletionRequest.model_validate({**req.model_dump(exclude_none=True), "tool_choice": "none"})
    assert tool_mode(plain, none) is None  # nothing to render: fine on any model
    qwen_like = SimpleNamespace(tokenizer=SimpleNamespace(chat_template="{% if tools %}<tool_call>{% endif %}"))
    assert tool_mode(qwen_like, req).fmt == HERMES


ALPHABET = ["<tool_call>", "</tool_call>", "<tool", "_call>", "<", ">", "\n", " ", "text", '{"name": "add", ',
            '"arguments": {"a": 1}}', "{", "}", '"', "<|python_tag|>", '"parameters": {}}']


def test_streamed_and_whole_parses_agree_on_arbitrary_output():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(ALPHABET), max_size=20), st.sampled_from([HERMES, LLAMA3_JSON]),
           st.integers(1, 7))
    def check(parts, fmt, step):
        text = "".join(parts)
        content, calls = parse_tool_calls(text, fmt, NAMES)
        stream = ToolCallStream(fmt, NAMES)
        pieces = []
        for i in range(0, len(text), step):
            pieces += stream.push(text[i:i + step])
        pieces += stream.finish()
        assert ("".join(p for p in pieces if isinstance(p, str)) or None) == content
        assert [(c.name, c.arguments) for c in stream.calls] == [(c.name, c.arguments) for c in calls]
        for call in calls:  # every call is well formed
            assert call.name in NAMES and isinstance(json.loads(call.arguments), dict)

    check()
