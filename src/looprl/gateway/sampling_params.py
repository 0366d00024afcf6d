"""The run's sampling parameters and how the gateway applies them to an env's request.

For RL the sampling distribution belongs to the run, not to env code: `temperature` and `top_p` from
the run override the request's; `max_tokens` is the smaller of both; `stop` is the union. A run
`seed` becomes a distinct per-call seed (derived from the rollout id and call index), so sibling
rollouts stay diverse while the whole run stays reproducible.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, Field


class SamplingParams(BaseModel):
    """Sampling applied to every model call of the run (None: leave the request's value)."""

    temperature: float | None = Field(1.0, ge=0)
    """Sampling temperature; RL needs the same value the trainer assumes (default 1.0)."""
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    """Upper bound on tokens generated per call."""
    seed: int | None = None
    """Base seed; each call gets a seed derived from it, the rollout id and the call index."""
    stop: list[str] = Field(default_factory=list)


def call_seed(seed: int, rollout_id: str, idx: int) -> int:
    digest = hashlib.sha256(f"{seed}:{rollout_id}:{idx}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def apply_sampling(body: dict[str, Any], params: SamplingParams, rollout_id: str, idx: int) -> dict[str, Any]:
    """The request body to send upstream: the run's sampling plus vLLM's token-id and logprob fields."""
    out = dict(body)
    if params.temperature is not None:
        out["temperature"] = params.temperature
    if params.top_p is not None:
        out["top_p"] = params.top_p
    if params.max_tokens is not None:
        requested = out.get("max_tokens") or out.pop("max_completion_tokens", None)
        out["max_tokens"] = min(requested, params.max_tokens) if requested else params.max_tokens
    if params.seed is not None:
        out["seed"] = call_seed(params.seed, rollout_id, idx)
    if params.stop:
        stop = out.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        out["stop"] = stop + [s for s in params.stop if s not in stop]
    out["logprobs"] = True
    out["return_token_ids"] = True
    return out
