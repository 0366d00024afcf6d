"""Run-directory hand-off files: atomic writes, None until present, typed reads."""

import asyncio

from looprl.handoff import TrainBatch, TrainerReport, await_model, read_model, write_model
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample


def test_a_batch_round_trips_and_leaves_no_temporary_files(tmp_path):
    sample = TrainingSample(rollout_id="r", token_ids=[1, 2, 3], loss_mask=[False, True, True],
                            inference_logprobs=[0.0, -0.5, -0.1], advantage=0.5)
    path = tmp_path / "steps" / "step_1" / "batch.json"
    assert read_model(path, TrainBatch) is None
    batch = TrainBatch(step=1, micro_batches=pack([sample], 16), progress={"sampler": {"epoch": 0, "position": 1}})
    write_model(path, batch)
    assert read_model(path, TrainBatch) == batch
    assert [p.name for p in path.parent.iterdir()] == ["batch.json"]


async def test_await_model_returns_once_the_file_appears(tmp_path):
    path = tmp_path / "trainer.json"
    waiter = asyncio.create_task(await_model(path, TrainerReport))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    write_model(path, TrainerReport(step=2, metrics={"loss": 0.1}))
    assert (await asyncio.wait_for(waiter, 5)).metrics == {"loss": 0.1}
