"""Chat templates rendered like transformers' apply_chat_template: the real templates of both default models,
and the environment's rules (sandbox, whitespace control, helpers, errors) on small templates."""
from __future__ import annotations

import datetime

import pytest

from conftest import read_jsonl
from onewell.errors import OnewellError
from onewell.gguf import GGUFReader
from onewell.tokenizer import ChatTemplateError, MissingChatTemplateError, render_chat, require_chat_template

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "What is 2+2?"},
]
TURNS = (
    "<|im_start|>system\nYou are terse.<|im_end|>\n"
    "<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello!<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
)
GENERATION_PROMPT = "<|im_start|>assistant\n"


def template_of(path) -> str:
    with GGUFReader(path) as reader:
        return reader.metadata["tokenizer.chat_template"]


@pytest.fixture(scope="module")
def qwen_template(qwen_q4km_path) -> str:
    return template_of(qwen_q4km_path)


@pytest.fixture(scope="module")
def smollm_template(smollm_path) -> str:
    return template_of(smollm_path)


# ---------------------------------------------------------------------------------------------------------------
# The real templates


@pytest.mark.model
@pytest.mark.parametrize("which", ["qwen_template", "smollm_template"])
def test_turns_with_and_without_generation_prompt(request, which):
    template = request.getfixturevalue(which)
    assert render_chat(template, CONVERSATION) == TURNS + GENERATION_PROMPT
    assert render_chat(template, CONVERSATION, add_generation_prompt=False) == TURNS


@pytest.mark.model
def test_default_system_prompts(qwen_template, smollm_template):
    user = [{"role": "user", "content": "Hi"}]
    assert render_chat(qwen_template, user) == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n" + GENERATION_PROMPT)
    assert render_chat(smollm_template, user) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n" + GENERATION_PROMPT)


@pytest.mark.model
@pytest.mark.parametrize("which, greedy", [
    ("qwen_template", "greedy_qwen2.5-coder-0.5b-q4_k_m.jsonl"),
    ("smollm_template", "greedy_smollm2-135m-q4_1.jsonl"),
])
def test_rendering_reproduces_the_golden_chat_prompt(request, which, greedy):
    template = request.getfixturevalue(which)
    prompts = [case["prompt"] for case in read_jsonl(greedy) if case["prompt"].startswith("<|im_start|>")]
    assert len(prompts) == 1
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Write a haiku about memory bandwidth."}]
    assert render_chat(template, messages) == prompts[0]


@pytest.mark.model
def test_qwen_tools_and_tool_calls_keep_non_ascii(qwen_template):
    tool = {"type": "function", "function": {"name": "météo", "parameters": {"ville": "string"}}}
    messages = [
        {"role": "user", "content": "Quel temps à Paris ?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"function": {"name": "météo", "arguments": {"ville": "Paris"}}}]},
        {"role": "tool", "content": "18°C"},
    ]
    rendered = render_chat(qwen_template, messages, tools=[tool])
    assert rendered == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "météo", "parameters": {"ville": "string"}}}\n</tools>\n\n'
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nQuel temps à Paris ?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "météo", "arguments": {"ville": "Paris"}}\n</tool_call>'
        "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n18°C\n</tool_response><|im_end|>\n" + GENERATION_PROMPT)


@pytest.mark.model
def test_message_without_content_is_a_template_error(qwen_template):
    with pytest.raises(ChatTemplateError, match="TypeError"):
        render_chat(qwen_template, [{"role": "user", "content": None}])


# ---------------------------------------------------------------------------------------------------------------
# The environment


def test_raise_exception_becomes_a_chat_template_error():
    template = ("{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}"
                "{% endif %}ok")
    assert render_chat(template, [{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(ChatTemplateError, match="Conversation must start with user") as info:
        render_chat(template, [{"role": "assistant", "content": "x"}])
    assert isinstance(info.value, OnewellError)


def test_trim_and_lstrip_blocks():
    template = "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}"
    assert render_chat(template, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) == "[a]\n[b]\n"


def test_loop_controls_and_variables():
    template = ("{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
                "{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.content }}{% endfor %}"
                "|{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ answer }}")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "user", "content": "never"}]
    rendered = render_chat(template, messages, add_generation_prompt=False, bos_token="<s>", eos_token="</s>",
                           answer=42)
    assert rendered == "u|<s>|</s>|False|None|42"


def test_tojson_keeps_non_ascii_and_takes_indent():
    assert render_chat("{{ tools | tojson }}", [], tools=[{"q": "naïve <b>"}]) == '[{"q": "naïve <b>"}]'
    assert render_chat("{{ tools[0] | tojson(indent=2) }}", [], tools=[{"a": 1}]) == '{\n  "a": 1\n}'


def test_strftime_now():
    assert render_chat("{{ strftime_now('%Y') }}", []) == str(datetime.datetime.now().year)


def test_generation_block_renders_its_content():
    template = "{% for m in messages %}{% generation %}<{{ m.content }}>{% endgeneration %}{% endfor %}"
    assert render_chat(template, [{"role": "assistant", "content": "x"}]) == "<x>"


@pytest.mark.parametrize("template", [
    "{{ messages.append(1) }}",                  # immutable: no mutation of the caller's data
    "{{ messages.__class__.__mro__ }}",          # sandboxed: no reaching into Python internals
    "{{ undefined_thing.attribute }}",
])
def test_unsafe_or_broken_templates_are_chat_template_errors(template):
    with pytest.raises(ChatTemplateError, match="failed while rendering"):
        render_chat(template, [{"role": "user", "content": "x"}])


def test_syntax_error_names_the_line():
    with pytest.raises(ChatTemplateError, match=r"does not compile.*line 2"):
        render_chat("ok\n{% for m in %}", [])


@pytest.mark.parametrize("messages", ["hello", [["user", "hi"]], None])
def test_messages_must_be_a_list_of_dicts(messages):
    with pytest.raises(ChatTemplateError, match="message"):
        render_chat("{{ messages }}", messages)


def test_model_without_template_gives_a_clear_error():
    for missing in (None, "", "  \n"):
        with pytest.raises(MissingChatTemplateError, match="tiny-model has no chat template") as info:
            require_chat_template(missing, "tiny-model")
        assert isinstance(info.value, OnewellError)
    assert require_chat_template("{{ messages }}") == "{{ messages }}"
