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
from looprl.orchestrator.training_samples import TrainingSample
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


def token_lag_metrics(step: int, samples: Sequence[TrainingSample],
                      groups: Sequence[GroupCalls]) -> dict[str, float]:
    """`token_lag` and `token_lag_max`: mean and largest number of optimizer steps between the weights that
    sampled a trained token and the policy that trains on it (step N trains version N - 1), over the loss
    tokens of `samples`; `policy_versions_per_reply`: mean number of versions within one model call's reply
    over the calls of `groups` that recorded versions (above 1 only with in-flight updates). Each is left out
    when nothing was there to measure (no trained token, no call with versions)."""
    lags = [step - 1 - v for sample in samples for v, loss in zip(sample.policy_versions, sample.loss_mask) if loss]
    spans = [len(set(call.completion_policy_versions)) for group in groups for _, calls in group for call in calls
             if call.completion_policy_versions]
    out = {"token_lag": sum(lags) / len(lags), "token_lag_max": float(max(lags))} if lags else {}
    return out | ({"policy_versions_per_reply": sum(spans) / len(spans)} if spans else {})
