"""Request models of OpenAI's structured-output and tool fields (response_format, tools, tool_choice, tool calls
in the history), and the table of OpenAI fields onewell refuses because it cannot honour them."""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FUNCTION_NAME = r"^[A-Za-z0-9_.\-]{1,64}$"
MAX_TOOLS = 128
MAX_LOGIT_BIAS = 1024


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str = Field("response", max_length=64)
    description: str | None = None
    schema_: dict[str, Any] | bool = Field(alias="schema", description="the JSON Schema the reply must match")
    strict: bool | None = Field(None, description="the reply always matches the schema, strict or not")


class ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type json_schema needs a json_schema object with a schema")
        return self

    def as_dict(self) -> dict[str, Any] | None:
        if self.type == "json_schema":
            return {"type": "json_schema", "json_schema": {"schema": self.json_schema.schema_}}
        return {"type": self.type}


class FunctionDefinition(BaseModel):
    name: str = Field(pattern=FUNCTION_NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="JSON Schema of the arguments object")
    strict: bool | None = None


class ToolDefinition(BaseModel):
    type: Literal["function"]
    function: FunctionDefinition

    def for_template(self) -> dict[str, Any]:
        return {"type": "function", "function": self.function.model_dump(exclude_none=True)}


class FunctionName(BaseModel):
    name: str = Field(pattern=FUNCTION_NAME)


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class CalledFunction(BaseModel):
    name: str
    arguments: str | dict[str, Any] = Field(description="JSON text of an object (OpenAI) or the object itself")


class AssistantToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | None = None
    type: Literal["function"] = "function"
    function: CalledFunction

    def for_template(self) -> dict[str, Any]:
        # Templates write `arguments | tojson`: they want the object, not the JSON text OpenAI sends.
        args = self.function.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                raise ValueError(f"tool call {self.function.name!r} has arguments that are not JSON") from None
        call = {"type": "function", "function": {"name": self.function.name, "arguments": args}}
        return {**call, "id": self.id} if self.id else call


# OpenAI fields onewell does not implement: sending them with a value that asks for something is a 400 naming
# the field (never silently ignored). Value: (what counts as "not asking", why). Identifiers and bookkeeping
# fields that change nothing in the reply (user, metadata, service_tier, prompt_cache_key,
# safety_identifier) are accepted.
UNSUPPORTED_FIELDS: dict[str, tuple[tuple[Any, ...], str]] = {
    "functions": ((None, []), "the deprecated functions field is not supported; send tools instead"),
    "function_call": ((None,), "the deprecated function_call field is not supported; send tool_choice instead"),
    "audio": ((None,), "audio output is not supported"),
    "modalities": ((None, ["text"]), "only the text modality is supported"),
    "prediction": ((None,), "predicted outputs are not supported"),
    "reasoning_effort": ((None,), "reasoning_effort is not supported by this server"),
    "web_search_options": ((None,), "web search is not supported"),
    "verbosity": ((None,), "verbosity is not supported by this server"),
    "store": ((None, False), "storing completions is not supported"),
    "best_of": ((None, 1), "best_of > 1 is not supported"),
}


def unsupported_fields(data: dict[str, Any]) -> list[str]:
    """Messages for the fields in `data` that ask for something onewell cannot do."""
    problems = []
    for name, (harmless, why) in UNSUPPORTED_FIELDS.items():
        if name in data and not any(data[name] == ok and type(data[name]) is type(ok) for ok in harmless):
            problems.append(f"{name}: {why}")
    return problems
