"""The OpenAI wire format: request models that validate what clients send, response models that document
what the server answers (and feed /openapi.json).

Requests accept unknown fields (clients send `user`, `metadata`, ...) and ignore them; a known field with a
value we cannot honour (n > 1, audio, the deprecated functions: see openai_structured.UNSUPPORTED_FIELDS) is
rejected with a message instead of being silently ignored.
Numbers are strict: NaN, infinities and out-of-range values fail validation.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from onewell.serve.openai_structured import (MAX_LOGIT_BIAS, MAX_TOOLS, AssistantToolCall, ResponseFormat, ToolChoice,
                                             ToolDefinition, unsupported_fields)

# Floats that must be finite: pydantic otherwise lets NaN/inf through (Python's json accepts them).
Temperature = Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False)]
TopP = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
MinP = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Penalty = Annotated[float, Field(gt=0.0, le=100.0, allow_inf_nan=False)]
OpenAIPenalty = Annotated[float, Field(ge=-2.0, le=2.0, allow_inf_nan=False)]
Bias = Annotated[float, Field(ge=-100.0, le=100.0, allow_inf_nan=False)]

MAX_STOP_STRINGS = 16
MAX_TOP_LOGPROBS = 20


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow", str_max_length=1 << 24)

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1, description="tokens to generate; default: what the context has left")
    temperature: Temperature = Field(1.0, description="0 = greedy")
    top_p: TopP = 1.0
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    stop: str | list[str] | None = Field(None, description=f"up to {MAX_STOP_STRINGS} strings that end the reply")
    stream: bool = False
    n: int = Field(1, description="only 1 is supported")
    presence_penalty: OpenAIPenalty | None = Field(None, description="subtracted from tokens the reply has used")
    frequency_penalty: OpenAIPenalty | None = Field(None, description="subtracted per use in the reply")
    logit_bias: dict[str, Bias] | None = Field(None, description="{token id: bias added to its logit}")
    response_format: ResponseFormat | None = Field(None, description="text, json_object or json_schema")
    # llama.cpp-style extensions for constrained decoding
    grammar: str | None = Field(None, description="Lark (llguidance) or GBNF grammar the reply must match")
    json_schema: dict[str, Any] | None = Field(None, description="JSON Schema the reply must match")
    # llama.cpp-style extensions
    top_k: int = Field(0, ge=0, description="keep the k most likely tokens; 0 = off")
    min_p: MinP = 0.0
    repeat_penalty: Penalty = 1.0
    ignore_eos: bool = Field(False, description="keep generating past end-of-generation tokens")

    @model_validator(mode="before")
    @classmethod
    def _refuse_unsupported(cls, data: Any) -> Any:
        if isinstance(data, dict):
            problems = unsupported_fields(data)
            if problems:
                raise ValueError("; ".join(problems))
        return data

    @field_validator("n")
    @classmethod
    def _only_one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("only n=1 is supported")
        return n

    @field_validator("logit_bias")
    @classmethod
    def _token_ids(cls, bias: dict[str, float] | None) -> dict[str, float] | None:
        if bias is None:
            return None
        if len(bias) > MAX_LOGIT_BIAS:
            raise ValueError(f"at most {MAX_LOGIT_BIAS} logit_bias entries are supported")
        for key in bias:
            if not key.isdigit():
                raise ValueError(f"keys must be token ids (non-negative integers as strings), got {key!r}")
        return bias

    @model_validator(mode="after")
    def _one_constraint(self) -> _Request:
        text_only = self.response_format is not None and self.response_format.type == "text"
        given = [name for name in ("response_format", "grammar", "json_schema")
                 if getattr(self, name) is not None and not (name == "response_format" and text_only)]
        if len(given) > 1:
            raise ValueError(f"give only one of {', '.join(given)}: each one constrains the whole reply")
        return self

    def logit_bias_ids(self) -> dict[int, float]:
        return {int(k): v for k, v in (self.logit_bias or {}).items()}

    def response_format_dict(self) -> dict[str, Any] | None:
        return self.response_format.as_dict() if self.response_format is not None else None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, stop: str | list[str] | None) -> str | list[str] | None:
        if isinstance(stop, list) and len(stop) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are supported")
        return stop

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [s for s in ([self.stop] if isinstance(self.stop, str) else self.stop) if s]


class StreamOptions(BaseModel):
    include_usage: bool = False


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[AssistantToolCall] | None = Field(None, description="an assistant turn's calls")
    tool_call_id: str | None = Field(None, description="the call a tool message answers")

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)

    def for_template(self) -> dict[str, Any]:
        # "developer" is the newer name of "system"; chat templates of open models only know the latter.
        role = "system" if self.role == "developer" else self.role
        message: dict[str, Any] = {"role": role, "content": self.text()}
        if self.name is not None:
            message["name"] = self.name
        if self.tool_calls:
            message["tool_calls"] = [call.for_template() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message


class ChatCompletionRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    max_completion_tokens: int | None = Field(None, ge=1, description="newer name of max_tokens")
    stream_options: StreamOptions | None = None
    tools: list[ToolDefinition] | None = Field(None, max_length=MAX_TOOLS, description="functions the model may call")
    tool_choice: ToolChoice | None = Field(None, description="auto (default with tools), none, required, or "
                                                             "{\"type\": \"function\", \"function\": {\"name\": ...}}")
    parallel_tool_calls: bool = Field(True, description="allow more than one call in a reply")

    @model_validator(mode="after")
    def _tool_choice_needs_tools(self) -> ChatCompletionRequest:
        choice = self.tool_choice
        if choice not in (None, "none", "auto") and not self.tools:
            raise ValueError("tool_choice other than none/auto needs tools")
        if isinstance(choice, BaseModel) and choice.function.name not in {t.function.name for t in self.tools}:
            raise ValueError(f"tool_choice names function {choice.function.name!r}, which is not among the tools")
        if self.tools and choice not in (None, "none", "auto") and (self.grammar or self.json_schema or (
                self.response_format is not None and self.response_format.type != "text")):
            raise ValueError("a required tool call and a response format/grammar cannot both constrain the reply")
        return self

    def active_tools(self) -> list[ToolDefinition]:
        """The tools rendered into the prompt: none when tool_choice is "none"."""
        return [] if not self.tools or self.tool_choice == "none" else list(self.tools)

    def forced_tools(self) -> list[ToolDefinition]:
        """The tools one of which the reply must call (required / named), else []."""
        choice = self.tool_choice
        if not self.tools or choice in (None, "none", "auto"):
            return []
        if choice == "required":
            return list(self.tools)
        return [t for t in self.tools if t.function.name == choice.function.name]

    @model_validator(mode="after")
    def _top_logprobs_needs_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs=true")
        return self

    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def logprobs_count(self) -> int | None:
        """None: no logprobs; k: the chosen token's logprob and the k most likely alternatives."""
        return (self.top_logprobs or 0) if self.logprobs else None


class CompletionRequest(_Request):
    prompt: str | list[str] | list[int] = Field(description="a string, a list of one string, or token ids")
    max_tokens: int | None = Field(16, ge=1, description="tokens to generate (OpenAI's default is 16); "
                                                        "null: what the context has left")
    logprobs: int | None = Field(None, ge=0, le=5, description="also return the k most likely alternatives")
    echo: bool = False
    suffix: str | None = None
    stream_options: StreamOptions | None = None

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str] | list[int]) -> str | list[str] | list[int]:
        if isinstance(prompt, list):
            if not prompt:
                raise ValueError("the prompt is empty")
            if isinstance(prompt[0], str) and len(prompt) != 1:
                raise ValueError("only one prompt per request is supported")
        return prompt

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, echo: bool) -> bool:
        if echo:
            raise ValueError("echo is not supported")
        return echo

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, suffix: str | None) -> str | None:
        if suffix:
            raise ValueError("suffix (fill-in-the-middle) is not supported")
        return suffix

    def token_limit(self) -> int | None:
        return self.max_tokens

    def logprobs_count(self) -> int | None:
        return self.logprobs


# ----------------------------------------------------------------------------------------------------------
# Responses (built as plain dicts by the server; these models document them in /openapi.json)


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="prompt tokens reused from a slot's KV cache, not evaluated again")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class ResponseFunction(BaseModel):
    name: str
    arguments: str = Field(description="JSON text of the arguments object")


class ResponseToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: ResponseFunction


class StreamedToolCall(ResponseToolCall):
    index: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None = Field(description="null when the reply is only tool calls")
    tool_calls: list[ResponseToolCall] | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop", "length", "tool_calls"]
    logprobs: ChoiceLogprobs | None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[StreamedToolCall] | None = Field(None, description="each call whole, in one delta")


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChatDelta
    finish_reason: Literal["stop", "length", "tool_calls"] | None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = Field(None, description="on the last chunk (after the one with finish_reason when "
                                                  "stream_options.include_usage is set)")


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: Literal["stop", "length"] | None
    logprobs: CompletionLogprobs | None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    meta: dict[str, Any] = Field(description="n_ctx per slot, slots, architecture")


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok"]


class Metrics(BaseModel):
    slots: int
    active_slots: int
    queue_length: int
    queue_capacity: int
    requests_served: int
    requests_rejected: int = Field(description="turned away because the queue was full (503)")
    requests_cancelled: int = Field(description="clients that left before their reply was finished")
    requests_failed: int
    requests_invalid: int = Field(description="answered 4xx before reaching the scheduler")
    prompt_tokens_evaluated: int
    prompt_tokens_cached: int
    tokens_generated: int
    kv_tokens_in_use: int = Field(description="tokens held in the slots' KV caches (busy or kept for reuse)")
    kv_tokens_capacity: int
    ticks: int
