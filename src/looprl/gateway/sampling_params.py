"""How the gateway applies the run's sampling (`looprl.config.SamplingParams`) to an env's request.

For RL the sampling distribution belongs to the run, not to env code: `temperature` and `top_p` from
the run override the request's; `max_tokens` is the smaller of both; `stop` is the union. A run
`seed` becomes a distinct per-call seed (derived from the rollout id and call index), so sibling
rollouts stay diverse while the whole run stays reproducible.
"""

from __future__ import annotations

import hashlib
from typing import Any

from looprl.config import SamplingParams


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
