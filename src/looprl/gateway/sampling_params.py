"""How the gateway applies the run's sampling (`looprl.config.SamplingParams`) to an env's request.

For RL the sampling distribution belongs to the run, not to env code: `temperature` and `top_p` from
the run override the request's; the completion limit is the smallest of the request's `max_tokens`, its
`max_completion_tokens` (the newer OpenAI name, which vLLM prefers when both are given) and the run's
`max_tokens`, sent upstream as `max_tokens` alone, so no field of the request can lift it (nor the
gateway's context budget, applied on top); `stop` is the union. A run
`seed` becomes a distinct per-call seed, derived from the rollout's seed key and the call's index: the key
names what the rollout is in the run (a training draw's epoch and position, and its place among its
siblings), not its random id, so sibling rollouts stay diverse while the same seed draws the same
numbers for the same rollout in another run of the same config. A request's `stream` and
`stream_options` are not sent on: the upstream answers whole, and the gateway streams that answer itself.
"""

from __future__ import annotations

import hashlib
from typing import Any

from looprl.config import SamplingParams


def call_seed(seed: int, key: str, idx: int) -> int:
    """The seed of call `idx` of the rollout whose seed key is `key`."""
    digest = hashlib.sha256(f"{seed}:{key}:{idx}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def completion_limit(body: dict[str, Any], run_max_tokens: int | None) -> int | None:
    """The smallest of the request's `max_tokens` and `max_completion_tokens` and the run's `max_tokens`
    (None: no limit; a request's value that is not a positive int counts as unset)."""
    limits = [v for v in (body.get("max_tokens"), body.get("max_completion_tokens"), run_max_tokens)
              if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(limits) if limits else None


def apply_sampling(body: dict[str, Any], params: SamplingParams, seed_key: str, idx: int) -> dict[str, Any]:
    """The request body to send upstream: the run's sampling plus vLLM's token-id and logprob fields;
    `seed_key`: what call `idx`'s seed derives from (`Gateway.open_session`)."""
    out = dict(body)
    if params.temperature is not None:
        out["temperature"] = params.temperature
    if params.top_p is not None:
        out["top_p"] = params.top_p
    limit = completion_limit(out, params.max_tokens)
    out.pop("max_completion_tokens", None)
    out.pop("max_tokens", None)
    if limit is not None:
        out["max_tokens"] = limit
    if params.seed is not None:
        out["seed"] = call_seed(params.seed, seed_key, idx)
    if params.stop:
        stop = out.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        out["stop"] = stop + [s for s in params.stop if s not in stop]
    out["logprobs"] = True
    out["return_token_ids"] = True
    out.pop("stream", None)  # the gateway takes the whole answer and streams it itself (looprl.gateway.app)
    out.pop("stream_options", None)
    return out
