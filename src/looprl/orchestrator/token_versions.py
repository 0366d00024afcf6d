"""The weights versions that sampled a group's tokens: its staleness and its token lag.

Each recorded model call names the version of every completion token (`ModelCall.completion_policy_versions`,
from the engine's `weight_versions`). With in-flight weight updates (`orchestrator.in_flight_updates`) one
reply may span several versions, so a group is as old as its *oldest token*, not as the weights it started
on; `max_off_policy_steps` bounds that (`inflight.GroupPool`). Calls whose engine named no versions count
as sampled by the version the group started on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from looprl.envs.types import RolloutResult
from looprl.store.records import ModelCall

GroupCalls = Sequence[tuple[RolloutResult, Sequence[ModelCall]]]


def token_versions(group: GroupCalls) -> Iterable[int]:
    """The version of every completion token the group's calls recorded one for."""
    for _, calls in group:
        for call in calls:
            yield from call.completion_policy_versions or ()


def oldest_version(group: GroupCalls) -> int | None:
    """The oldest version any of the group's tokens was sampled by; None if no call recorded versions."""
    return min(token_versions(group), default=None)


def token_lag_metrics(step: int, groups: Sequence[tuple[int, GroupCalls]]) -> dict[str, float]:
    """`token_lag` and `token_lag_max`: mean and largest number of optimizer steps between the weights that
    sampled a completion token and the policy that trains on it (step N trains version N - 1), over the
    tokens of `groups`, each `(version it started on, group)` (tokens without a recorded version count as
    sampled by it); `policy_versions_per_reply`: mean number of versions within one model call's reply."""
    lags: list[int] = []
    spans: list[int] = []
    for start, group in groups:
        for _, calls in group:
            for call in calls:
                versions = call.completion_policy_versions or [start] * call.completion_tokens
                lags += [step - 1 - v for v in versions]
                if versions:
                    spans.append(len(set(versions)))
    return {"token_lag": sum(lags) / max(len(lags), 1), "token_lag_max": float(max(lags, default=0)),
            "policy_versions_per_reply": sum(spans) / max(len(spans), 1)}
