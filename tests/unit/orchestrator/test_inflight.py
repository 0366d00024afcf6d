"""The in-flight group pool: completion order, prefetch only when fresh, stale groups dropped."""

from __future__ import annotations

import asyncio

import pytest

from looprl.orchestrator.inflight import GroupPool


class Groups:
    """Launches groups that finish when the test releases them; records what was started."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.version = 0

    async def launch(self) -> int:
        n = len(self.started)
        self.started.append(n)
        self.gates[n] = asyncio.Event()
        await self.gates[n].wait()
        return n

    def release(self, *ns: int) -> None:
        for n in ns:
            self.gates[n].set()


def pool(groups: Groups, per_step: int = 2, lag: int = 1) -> GroupPool[int]:
    return GroupPool(groups.launch, lambda: groups.version, per_step, lag)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_step_takes_the_first_groups_to_finish_and_the_rest_carry_over():
    groups = Groups()
    groups.version = 0
    p = pool(groups, per_step=2, lag=1)
    task = asyncio.ensure_future(p.collect(step=1, prefetch=True))
    await settle()
    # step 1 needs version >= -1 for itself and >= 0 for step 2: both hold, so 2 + 2 groups start
    assert groups.started == [0, 1, 2, 3]
    groups.release(3, 1)
    got = await task
    assert sorted(g.group for g in got.fresh) == [1, 3] and got.stale == []
    assert len(p.tasks) == 2  # groups 0 and 2 run on into step 2
    groups.release(0, 2)
    got = await p.collect(step=2, prefetch=False)
    assert sorted(g.group for g in got.fresh) == [0, 2]
    assert len(p.tasks) == 0


async def test_no_prefetch_while_the_next_step_would_find_the_groups_stale():
    groups = Groups()
    groups.version = 0
    p = pool(groups, per_step=2, lag=1)
    task = asyncio.ensure_future(p.collect(step=2, prefetch=True))  # step 3 needs version >= 1
    await settle()
    assert groups.started == [0, 1]
    groups.release(0, 1)
    await task
    assert groups.started == [0, 1] and not p.tasks


async def test_stale_groups_are_dropped_counted_and_replaced():
    groups = Groups()
    p = pool(groups, per_step=2, lag=1)
    first = asyncio.ensure_future(p.collect(step=1, prefetch=True))
    await settle()
    groups.release(0, 1)
    await first  # groups 2 and 3 (version 0) are still running
    groups.version = 2  # the trainer raced ahead: version-0 groups are stale for step 3
    groups.release(2)
    got = asyncio.ensure_future(p.collect(step=3, prefetch=False))
    await settle()
    assert groups.started == [0, 1, 2, 3, 4]  # group 2 dropped, replaced on version 2
    groups.release(3, 4)
    await settle()
    groups.release(*range(5, len(groups.started)))
    result = await got
    assert [g.group for g in result.stale] == [2, 3]
    assert all(g.policy_version == 2 for g in result.fresh) and len(result.fresh) == 2


async def test_after_a_rollback_groups_of_the_collapsed_policy_are_stale_however_recent():
    """Collapse recovery rolled back at step 2 (`floor` = 2): version-1 groups, within the lag bound of step 3,
    sampled the policy that stopped exploring, so step 3 drops them and trains on the restored weights' own."""
    groups = Groups()
    groups.version = 1
    p = pool(groups, per_step=2, lag=1)
    first = asyncio.ensure_future(p.collect(step=2, prefetch=True))
    await settle()
    groups.release(0, 1)
    await first  # groups 2 and 3 (version 1) were prefetched for step 3
    p.floor, groups.version = 2, 2
    groups.release(2, 3)
    got = asyncio.ensure_future(p.collect(step=3, prefetch=False))
    await settle()
    groups.release(*range(4, len(groups.started)))
    result = await got
    assert sorted(g.group for g in result.stale) == [2, 3]  # finished together: in either order
    assert [g.policy_version for g in result.fresh] == [2, 2]


async def test_before_top_up_runs_before_groups_start():
    groups = Groups()
    p = pool(groups, per_step=1, lag=0)

    async def load_newer_weights() -> None:
        groups.version = 7

    task = asyncio.ensure_future(p.collect(step=8, prefetch=False, before_top_up=load_newer_weights))
    await settle()
    groups.release(0)
    result = await task
    assert result.fresh[0].policy_version == 7


async def test_a_failing_group_propagates_and_cancel_stops_the_rest():
    async def launch() -> int:
        await asyncio.sleep(0)
        raise RuntimeError("env host died")

    p: GroupPool[int] = GroupPool(launch, lambda: 0, 2, 1)
    with pytest.raises(RuntimeError, match="env host died"):
        await p.collect(step=1)
    await p.cancel()
    assert not p.tasks


async def test_dynamic_sampling_replaces_groups_without_signal_up_to_the_cap():
    groups = Groups()
    p = pool(groups, per_step=2)
    task = asyncio.ensure_future(p.collect(step=1, prefetch=False, keep=lambda n: n % 2 == 0, max_extra=1))
    await settle()
    groups.release(0, 1)  # 1 has no signal: replaced by a third group
    await settle()
    assert groups.started == [0, 1, 2] and not task.done()
    groups.release(2)
    got = await task
    assert [g.group for g in got.fresh] == [0, 2] and [g.group for g in got.filtered] == [1]

    capped = asyncio.ensure_future(p.collect(step=1, prefetch=False, keep=lambda n: False, max_extra=1))
    await settle()
    groups.release(*range(3, len(groups.started)))
    await settle()
    groups.release(*range(3, len(groups.started)))
    got = await capped
    assert got.fresh == [] and len(got.filtered) == 3  # 2 + at most 1 extra, then the step goes on


async def test_staleness_is_bounded_by_the_oldest_token_not_the_start():
    """With per-token versions, a group is as old as its oldest token: one tagged version 0 whose tokens all
    came from version 2 (it waited in the engine's queue) is fresh for step 4 with lag 1; one whose reply
    started on version 1 and continued on 3 (an in-flight update) is stale there, though most of it is new."""
    groups = Groups()
    oldest = {0: 2, 1: 1}
    p = GroupPool(groups.launch, lambda: groups.version, 1, 1, oldest=lambda n: oldest.get(n))
    groups.version = 0
    task = asyncio.ensure_future(p.collect(step=4, prefetch=False))
    await settle()
    groups.release(0)
    got = await task
    assert [(g.group, g.policy_version, g.started_version) for g in got.fresh] == [(0, 2, 0)] and got.stale == []
    task = asyncio.ensure_future(p.collect(step=4, prefetch=False))
    await settle()
    groups.version = 3  # the stale group's replacement starts on version 3 (it records no versions: its tag)
    groups.release(1)
    await settle()
    groups.release(2)
    got = await task
    assert [(g.group, g.policy_version, g.started_version) for g in got.stale] == [(1, 1, 0)]
    assert [(g.group, g.policy_version) for g in got.fresh] == [(2, 3)]


def test_token_lag_counts_every_trained_token_by_its_own_version():
    from looprl.envs.types import RolloutResult
    from looprl.orchestrator.token_versions import oldest_version, token_lag_metrics
    from looprl.orchestrator.training_samples import build_samples
    from looprl.store.records import ModelCall

    def call(idx: int, prompt: list[int], versions: list[int] | None, tokens: int) -> ModelCall:
        return ModelCall(rollout_id="r", idx=idx, started_at=0.0, latency_s=0.0, completion_tokens=tokens,
                         prompt_token_ids=prompt, completion_token_ids=[7] * tokens,
                         completion_logprobs=[-0.5] * tokens, completion_policy_versions=versions)

    calls = [call(0, [1, 2], [1, 1, 2, 3], 4), call(1, [1, 2, 7, 7, 7, 7, 9], None, 2)]
    result = RolloutResult.model_construct(rollout_id="r")
    assert oldest_version([(result, calls)]) == 1 and oldest_version([(result, calls[1:])]) is None
    [sample] = build_samples("r", calls, 1.0, version=1)  # the unlabelled call counts as version 1 (its start)
    assert sample.policy_versions == [-1, -1, 1, 1, 2, 3, -1, 1, 1]
    m = token_lag_metrics(4, [sample], [[(result, calls)]])  # step 4 trains version 3
    assert m["token_lag"] == (2 + 2 + 1 + 0 + 2 + 2) / 6 and m["token_lag_max"] == 2
    assert m["policy_versions_per_reply"] == 3  # the one call that recorded versions spans three
