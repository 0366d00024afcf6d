"""Turning an upstream chat-completions exchange into a `ModelCall` record.

Reads vLLM's token extensions (`prompt_token_ids` at the top level or on the choice,
`choices[].token_ids`, `choices[].logprobs.content[].logprob`, and `choices[].weight_versions`: the
spans of completion tokens each weights version sampled, which both engines return) and tolerates
upstreams that return none of them: the record then carries `None` and only the usage counts.
"""

from __future__ import annotations

from typing import Any

from looprl.store.records import ModelCall


def _logprobs(choice: dict[str, Any]) -> list[float] | None:
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    return [float(t["logprob"]) for t in content]


def _versions(choice: dict[str, Any], tokens: int) -> list[int] | None:
    """The weights version of each completion token, from the choice's `weight_versions` spans; None
    unless they are integer labels that cover every token."""
    spans = choice.get("weight_versions")
    if not spans:
        return None
    versions: list[int] = []
    try:
        for span in sorted(spans, key=lambda s: int(s["start"])):
            if int(span["start"]) != len(versions):
                return None
            versions += [int(span["version"])] * (int(span["end"]) - int(span["start"]))
    except (KeyError, TypeError, ValueError):
        return None
    return versions if len(versions) == tokens else None


def record_call(rollout_id: str, idx: int, started_at: float, latency_s: float, status: int,
                body: dict[str, Any] | None, error: str | None = None) -> ModelCall:
    """The record of one call; `body` is the upstream's JSON response (None when there was none)."""
    if not body or status != 200 or not body.get("choices"):
        return ModelCall(rollout_id=rollout_id, idx=idx, started_at=started_at, latency_s=latency_s,
                         status=status, error=error)
    choice = body["choices"][0]
    prompt_ids = body.get("prompt_token_ids") or choice.get("prompt_token_ids")
    completion_ids = choice.get("token_ids")
    usage = body.get("usage") or {}
    return ModelCall(
        rollout_id=rollout_id, idx=idx, started_at=started_at, latency_s=latency_s, status=status,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or len(prompt_ids or [])),
        completion_tokens=int(usage.get("completion_tokens") or len(completion_ids or [])),
        prompt_token_ids=list(prompt_ids) if prompt_ids is not None else None,
        completion_token_ids=list(completion_ids) if completion_ids is not None else None,
        completion_logprobs=_logprobs(choice), error=error,
        completion_policy_versions=_versions(choice, len(completion_ids)) if completion_ids is not None else None,
    )
