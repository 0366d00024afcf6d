"""Wire types of the embedded engine: OpenAI chat completions with vLLM's token extensions.

Producer of requests: the gateway (or any OpenAI client); consumer: `looprl.inference.server`.
The request accepts OpenAI's fields plus vLLM's `return_token_ids`; unknown fields are ignored, as
OpenAI clients send many. The response carries vLLM's `prompt_token_ids` (top level) and
`choices[].token_ids` when `return_token_ids` is set, so the gateway treats this engine and vLLM
alike. With `stream: true` the same answer comes as OpenAI's server-sent events.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from looprl.utils.chat_stream import StreamFields


class ErrorDetail(BaseModel):
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Body of every non-2xx answer, as OpenAI sends it."""

    error: ErrorDetail


class ToolFunction(BaseModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(BaseModel):
    type: Literal["function"] = "function"
    function: ToolFunction


class ChatMessage(BaseModel):
    """One message of the conversation; `content` may be a string or OpenAI text parts."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ChatCompletionRequest(StreamFields):
    """`stream` and `stream_options` by the gateway's rule (`StreamFields`, one validator for both servers)."""

    model_config = ConfigDict(extra="ignore")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto"] | None = None
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    """A signed 64-bit integer, as vLLM accepts (`torch.Generator` takes no larger one)."""
    n: int = Field(1, ge=1, le=64)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    return_token_ids: bool = False

    @model_validator(mode="after")
    def _check(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs: true")
        if any(s == "" for s in self.stop_list):
            raise ValueError("stop strings must not be empty")
        return self

    @property
    def stop_list(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    @property
    def max_new_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = []


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob]


class ToolCallFunction(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] = []


class WeightVersionSpan(BaseModel):
    """Completion tokens `[start, end)` were sampled by the weights labelled `version` (vLLM's shape)."""

    version: str
    start: int
    end: int


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop", "length", "tool_calls"]
    logprobs: ChoiceLogprobs | None = None
    token_ids: list[int] | None = None
    weight_versions: list[WeightVersionSpan] | None = None
    """With `return_token_ids`: which weights sampled which tokens (more than one span when an in-flight
    weight update landed while this choice was generated)."""


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    prompt_token_ids: list[int] | None = None


class UpdateWeightsRequest(BaseModel):
    path: str
    version: int | None = None
    """Label for the new weights (e.g. the trainer step); default: the previous version + 1."""
    in_flight: bool = False
    """Swap between two decoding steps of the running requests, which continue on the new weights,
    instead of once they have finished."""


class WeightsInfo(BaseModel):
    version: int
    path: str
    model: str
    """The name requests for these weights use (vLLM with LoRA: the adapter's name)."""


class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"
    model: str
    weights: WeightsInfo
