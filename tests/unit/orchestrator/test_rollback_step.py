"""Collapse recovery by rollback through the RL step: the step at which the watch fires hands the trainer a
`rollback` batch with nothing to train, its groups with signal are stored without an advantage (they did not
train), and groups the collapsed policy sampled are stale from then on (the pool's floor)."""

import asyncio

from tests.unit.orchestrator.test_zero_filled import FakePool, FakeSampler, result, step_only

from looprl.handoff import TrainBatch, read_model
from looprl.paths import batch_path
from looprl.store.reader import RunStoreReader


def test_the_step_that_rolls_back_trains_nothing_and_raises_the_pools_floor(tmp_path):
    orch = step_only(tmp_path, collapse={"method": "rollback"})
    orch.cfg = orch.cfg.model_copy(update={"max_steps": 3})

    def groups(step: int) -> list:
        """Two groups without signal (one all right, one all wrong: a policy answering alike) and one with."""
        return [[(result(f"{step}{g}{i}", {"correct": r}, f"{step}{g}"), []) for i, r in enumerate(rewards)]
                for g, rewards in (("a", (1.0, 1.0)), ("b", (0.0, 0.0)), ("c", (1.0, 0.0)))]

    pools = [FakePool(groups(step), []) for step in (1, 2, 3)]

    async def run() -> None:
        for step, pool in enumerate(pools, 1):
            await orch.step(step, FakeSampler(), pool)

    asyncio.run(run())
    orch.session.writer.close()
    batches = [read_model(batch_path(tmp_path, step), TrainBatch) for step in (1, 2, 3)]
    assert [(b.rollback, b.explored) for b in batches] == [(False, False), (False, False), (True, False)]
    assert batches[2].micro_batches == [] and orch.pending[3]["samples"] == 0
    assert [p.floor for p in pools] == [0, 0, 3]
    advantages = {r.rollout_id: r.advantage for r in RunStoreReader(tmp_path).list_rollouts("run")[0]}
    assert advantages["1c0"] is not None and advantages["3c0"] is None  # the signal group of step 3 did not train


def test_a_step_sampled_at_a_raised_temperature_is_not_kept_to_go_back_to(tmp_path):
    """Its signal came from the temperature, on weights that may be the collapsed policy's: the batch is not marked
    `explored`, so the trainer's copy stays that of the last step that explored at the configured temperature."""
    orch = step_only(tmp_path, collapse={"method": "temperature"})
    orch.cfg = orch.cfg.model_copy(update={"max_steps": 2})

    def groups(step: int) -> list:
        return [[(result(f"{step}{g}{i}", {"correct": float(i)}, f"{step}{g}"), []) for i in range(2)]
                for g in "ab"]

    async def run() -> None:
        await orch.step(1, FakeSampler(), FakePool(groups(1), []))
        assert orch.recovery is not None
        orch.recovery.temperature = 1.25  # raised after a collapse
        await orch.step(2, FakeSampler(), FakePool(groups(2), []))

    asyncio.run(run())
    orch.session.writer.close()
    assert [read_model(batch_path(tmp_path, step), TrainBatch).explored for step in (1, 2)] == [True, False]
