"""Structured output and tool calling through the official `openai` client against the live server, on the
default model (Qwen2.5-Coder-0.5B-Instruct, whose chat template renders tools), sampled at temperature 0.7:
every reply must validate against its schema because the grammar engine masks the logits."""
from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest
from conftest import scaled

import onewell
from onewell.serve.app import create_app
from onewell.serve.background import BackgroundServer

pytest.importorskip("llguidance")
pytestmark = pytest.mark.model

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "address"],
          "properties": {"name": {"type": "string", "maxLength": 40},
                         "age": {"type": "integer", "minimum": 0, "maximum": 130},
                         "address": {"type": "object", "additionalProperties": False, "required": ["city", "zip"],
                                     "properties": {"city": {"type": "string", "maxLength": 30},
                                                    "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}}}
SHOPPING = {"type": "object", "required": ["items"], "additionalProperties": False,
            "properties": {"items": {"type": "array", "minItems": 2, "maxItems": 4,
                                     "items": {"type": "string", "maxLength": 20}}}}
TICKET = {"type": "object", "required": ["priority", "status"], "additionalProperties": False,
          "properties": {"priority": {"enum": ["low", "medium", "high"]},
                         "status": {"type": "string", "enum": ["open", "closed"]}}}
PLATE = {"type": "object", "required": ["plate", "country"], "additionalProperties": False,
         "properties": {"plate": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
                        "country": {"type": "string", "pattern": "^[A-Z]{2}$"}}}
MEASURE = {"type": "object", "required": ["temperature", "humidity", "readings"], "additionalProperties": False,
           "properties": {"temperature": {"type": "number", "minimum": -50, "maximum": 60},
                          "humidity": {"type": "integer", "minimum": 0, "maximum": 100},
                          "readings": {"type": "array", "minItems": 1, "maxItems": 3,
                                       "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 10}}}}
TEAM = {"type": "object", "required": ["team"], "additionalProperties": False, "$defs": {
            "member": {"type": "object", "required": ["name", "role"], "additionalProperties": False,
                       "properties": {"name": {"type": "string", "maxLength": 20},
                                      "role": {"enum": ["dev", "ops", "lead"]}}}},
        "properties": {"team": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"$ref": "#/$defs/member"}}}}

SCHEMAS = {  # name -> (schema, what to ask for)
    "person_nested": (PERSON, "Invent a person with a name, age and address."),
    "shopping_array": (SHOPPING, "Write a short shopping list."),
    "ticket_enum": (TICKET, "Classify this support ticket: 'the site is down for everyone'."),
    "plate_pattern": (PLATE, "Invent a car licence plate."),
    "weather_numbers": (MEASURE, "Report today's weather measurements."),
    "team_refs": (TEAM, "Describe a small software team."),
}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                   "properties": {"city": {"type": "string", "maxLength": 40},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
ADD_TOOL = {"type": "function", "function": {
    "name": "add", "description": "Add two numbers",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["a", "b"],
                   "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}
TOOLS = [WEATHER_TOOL, ADD_TOOL]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def server(qwen_q4km_path):
    model = onewell.load(qwen_q4km_path, threads=1, n_ctx=1024)
    with BackgroundServer(create_app(model, parallel=2, queue=4, model_name="qwen")) as s:
        yield s


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=scaled(120))


def ask(text: str) -> list[dict]:
    return [{"role": "system", "content": "You answer with JSON only."}, {"role": "user", "content": text}]


def schema_format(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_replies_validate_at_temperature_0_7(client, name):
    schema, question = SCHEMAS[name]
    r = client.chat.completions.create(model="qwen", messages=ask(question), temperature=0.7, max_tokens=200,
                                       seed=hash(name) % 1000, response_format=schema_format(name, schema))
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_streamed_json_schema_reply_validates(client):
    schema, question = SCHEMAS["person_nested"]
    pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="qwen", messages=ask(question), temperature=0.7, max_tokens=200, seed=7, stream=True,
        response_format=schema_format("person", schema)) if c.choices]
    assert sum(bool(p) for p in pieces) >= 3  # really streamed
    jsonschema.validate(json.loads("".join(pieces)), schema)


def test_json_object_and_grammar_fields(client, server):
    r = client.chat.completions.create(model="qwen", messages=ask("Give me any JSON object about cats."),
                                       temperature=0.7, max_tokens=120, response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    for grammar in ('root ::= "yes" | "no"', 'start: "yes" | "no"'):  # GBNF and Lark
        r = httpx.post(server.url + "/v1/chat/completions", timeout=scaled(60), json={
            "messages": [{"role": "user", "content": "Is the sky green?"}], "grammar": grammar, "temperature": 0.7})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] in ("yes", "no")
    r = httpx.post(server.url + "/v1/completions", timeout=scaled(60), json={
        "prompt": "The answer is", "json_schema": {"type": "integer"}, "max_tokens": 8, "temperature": 0.7})
    assert isinstance(json.loads(r.json()["choices"][0]["text"]), int)


def check_call(call):
    assert call.type == "function" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])


def test_required_tool_choice_returns_a_parsed_call(client):
    r = client.chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": "How warm is it in Lisbon right now?"}],
        tools=TOOLS, tool_choice="required", temperature=0.7, max_tokens=150, seed=3)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    for call in choice.message.tool_calls:
        check_call(call)


def test_named_tool_choice_calls_that_function(client):
    r = client.chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": "What is 2 plus 40?"}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "add"}}, parallel_tool_calls=False,
        temperature=0.7, max_tokens=100)
    calls = r.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["add"]
    check_call(calls[0])


def test_streamed_required_tool_call(client):
    calls: dict[int, dict] = {}
    finish = None
    for chunk in client.chat.completions.create(
            model="qwen", messages=[{"role": "user", "content": "Weather in Oslo, please."}], tools=TOOLS,
            tool_choice="required", temperature=0.7, max_tokens=150, seed=5, stream=True):
        if not chunk.choices:
            continue
        for d in chunk.choices[0].delta.tool_calls or []:  # accumulate as OpenAI clients do
            entry = calls.setdefault(d.index, {"id": d.id, "name": "", "arguments": ""})
            entry["name"] += d.function.name or ""
            entry["arguments"] += d.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and calls
    for entry in calls.values():
        jsonschema.validate(json.loads(entry["arguments"]), PARAMS[entry["name"]])


def test_tool_results_in_the_history_are_rendered(client):
    history = [
        {"role": "user", "content": "How warm is it in Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Rome", "unit": "celsius"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 31}"},
    ]
    r = client.chat.completions.create(model="qwen", messages=history, tools=TOOLS, tool_choice="none",
                                       temperature=0, max_tokens=30)
    assert r.choices[0].finish_reason in ("stop", "length") and not r.choices[0].message.tool_calls
    assert "31" in r.choices[0].message.content  # it read the tool's answer


@pytest.mark.parametrize("body, fragment", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "integer", "minimum": 5, "maximum": 1}}}}, "Unsatisfiable"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}}},
     "Unimplemented keys"),
    ({"json_schema": {"type": "banana"}}, "Invalid type"),
    ({"grammar": "start: nothing_defined"}, "unknown name"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not among the tools"),
    ({"functions": [{"name": "f"}]}, "send tools instead"),
    ({"audio": {"voice": "alloy"}}, "audio"),
    ({"logit_bias": {"999999999": 5}}, "outside the vocabulary"),
    ({"logit_bias": {"5": 500}}, "logit_bias"),
    ({"presence_penalty": 3}, "presence_penalty"),
])
def test_bad_structured_requests_are_400_naming_the_problem(server, body, fragment):
    r = httpx.post(server.url + "/v1/chat/completions", timeout=scaled(30),
                   json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    assert fragment in r.json()["error"]["message"]


def test_logit_bias_bans_and_forces_tokens(client, server):
    messages = [{"role": "user", "content": "Say hello."}]
    plain = client.chat.completions.create(model="qwen", messages=messages, temperature=0, max_tokens=1,
                                           logprobs=True)
    first = plain.choices[0].logprobs.content[0].token
    model_tokenizer = server.app.state.onewell.model.tokenizer  # ban the greedy first token by its id
    first_id = next(i for i in range(model_tokenizer.n_vocab) if model_tokenizer.token_bytes(i) == first.encode())
    banned = client.chat.completions.create(model="qwen", messages=messages, temperature=0, max_tokens=1,
                                            logit_bias={str(first_id): -100}, logprobs=True)
    assert banned.choices[0].logprobs.content[0].token != first
    forced_id = model_tokenizer.encode(" banana")[0]
    forced = client.chat.completions.create(model="qwen", messages=messages, temperature=0.7, max_tokens=1,
                                            logit_bias={str(forced_id): 100})
    assert forced.choices[0].message.content == model_tokenizer.decode([forced_id])


def test_openai_parse_with_a_pydantic_model(client):
    from pydantic import BaseModel, Field

    class Book(BaseModel):
        title: str = Field(max_length=40)
        year: int = Field(ge=1400, le=2030)
        genres: list[str] = Field(min_length=1, max_length=3)

    r = client.chat.completions.parse(model="qwen", messages=ask("Recommend one classic novel."),
                                      response_format=Book, temperature=0.7, max_tokens=120, seed=11)
    book = r.choices[0].message.parsed
    assert isinstance(book, Book) and 1 <= len(book.genres) <= 3
