"""Running one group of sibling rollouts through an env host and the gateway.

Opens a gateway session per rollout (so every model call is attributed), asks the env host to run
the group, closes the sessions and returns each result with its recorded model calls.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from looprl.config import SamplingParams
from looprl.envs.types import DatasetSplit, Example, GroupRequest, RolloutResult
from looprl.gateway.app import Gateway
from looprl.store.records import ModelCall


class EnvHost(Protocol):
    """What the orchestrator needs from wherever env code runs (a thread, or env server processes)."""

    async def submit_group(self, request: GroupRequest) -> list[RolloutResult]: ...


def new_id() -> str:
    return uuid.uuid4().hex[:12]


async def rollout_group(host: EnvHost, gateway: Gateway, base_url_template: str, example: Example,
                        split: DatasetSplit, group_size: int, model: str,
                        timeout_s: float | None = None, group_id: str | None = None,
                        sampling: SamplingParams | None = None,
                        seed_key: str | None = None) -> list[tuple[RolloutResult, list[ModelCall]]]:
    """`group_id`: the group's id when the caller chose it (the prompt ledger's key), else a new one;
    `sampling`: the group's own (None: the gateway's); `seed_key`: what the group is in the run, the same in
    every run of its config: sibling i's sampling seeds derive from `{seed_key}/{i}` (None: from each
    rollout's new id, so no two runs draw alike)."""
    request = GroupRequest(group_id=group_id or new_id(), example=example, split=split,
                           rollout_ids=[new_id() for _ in range(group_size)], model=model,
                           base_url_template=base_url_template, timeout_s=timeout_s)
    for i, rid in enumerate(request.rollout_ids):
        gateway.open_session(rid, sampling=sampling, seed_key=None if seed_key is None else f"{seed_key}/{i}")
    try:
        results = await host.submit_group(request)
    finally:
        calls = {rid: gateway.close_session(rid) for rid in request.rollout_ids}
    place = {rid: i for i, rid in enumerate(request.rollout_ids)}  # the siblings' order, not the order they ended in
    results = sorted(results, key=lambda r: place.get(r.rollout_id, len(place)))
    return [(r, calls.get(r.rollout_id, [])) for r in results]
