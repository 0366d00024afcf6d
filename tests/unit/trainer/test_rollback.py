"""Collapse recovery by rollback, the trainer's side: the kept weights come back exactly, AdamW's momentum is
zeroed (its second moment kept, so the next step is small, not the largest of the run) and the learning rate is
lower from then on, through a scheduler checkpoint too."""

import pytest
import torch
from tests.support.tiny_model import tiny_model
from tests.unit.trainer.test_step import _on_policy_sample

from looprl.handoff import TrainBatch
from looprl.orchestrator.packing import pack
from looprl.trainer.loss import truncated
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.rollback import Rollback
from looprl.trainer.step import train_step


def _weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_restore_puts_back_the_kept_weights_zeroes_adams_momentum_and_lowers_the_learning_rate():
    model = tiny_model()
    optimizer = build_optimizer(model, lr=1e-2)
    scheduler = build_scheduler(optimizer, warmup_steps=2)
    rollback = Rollback(model, lr_factor=0.5)  # keeps the first weights

    def train() -> dict[str, float]:
        sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
        return train_step(model, optimizer, scheduler, pack([sample], 64), truncated.token_loss)

    train()
    kept = _weights(model)
    rollback.keep()
    train()
    assert any(not torch.equal(a, b) for a, b in zip(kept, _weights(model))) and optimizer.state
    second_moments = [s["exp_avg_sq"].clone() for s in optimizer.state.values()]
    rollback.restore(optimizer, scheduler)
    assert all(torch.equal(a, b) for a, b in zip(kept, _weights(model)))
    assert all(not s["exp_avg"].any() for s in optimizer.state.values())
    assert all(torch.equal(a, s["exp_avg_sq"]) for a, s in zip(second_moments, optimizer.state.values()))
    # the factor holds for every later step, the warmup's included, and survives a checkpoint of the scheduler
    assert train()["lr"] == pytest.approx(0.5 * 1e-2)
    resumed = build_scheduler(build_optimizer(tiny_model(), lr=1e-2), warmup_steps=2)
    resumed.load_state_dict(scheduler.state_dict())
    assert resumed.base_lrs == pytest.approx([0.5 * 1e-2])


def test_the_first_step_after_a_rollback_is_smaller_than_a_fresh_adamw_would_make():
    """Dropping AdamW's state at a rollback made the next update the learning rate times the gradient's sign for
    every weight, the largest step of the run (on large_number the restored policy swung to the other answer
    within steps); with the second moment kept, the momentum grows back from zero instead."""
    def first_update(drop_state: bool) -> float:
        torch.manual_seed(0)
        model = tiny_model()
        optimizer = build_optimizer(model, lr=1e-3)
        scheduler = build_scheduler(optimizer)
        rollback = Rollback(model, lr_factor=1.0)

        def train() -> None:
            sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
            train_step(model, optimizer, scheduler, pack([sample], 64), truncated.token_loss)

        for _ in range(5):
            train()
        rollback.restore(optimizer, scheduler)
        if drop_state:
            optimizer.state.clear()
        before = _weights(model)
        train()
        return sum(float((a - b).abs().sum()) for a, b in zip(before, _weights(model)))

    assert first_update(drop_state=False) < 0.5 * first_update(drop_state=True)


def test_the_trainer_keeps_explored_steps_weights_and_goes_back_to_the_last_on_a_rollback_batch():
    """The trainer's side of the batches the orchestrator marks: weights kept before an `explored` batch only,
    and a `rollback` batch puts back the last kept (not those of a later batch without signal), announcing
    the change first and training nothing."""
    model = tiny_model()
    optimizer = build_optimizer(model, lr=1e-2)
    scheduler = build_scheduler(optimizer)
    rollback, changes = Rollback(model, lr_factor=0.5), []

    def step(batch: TrainBatch) -> bool:
        rolled = rollback.before_step(batch, optimizer, scheduler, lambda: changes.append(batch.step))
        sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
        train_step(model, optimizer, scheduler, [] if rolled else pack([sample], 64), truncated.token_loss)
        return rolled

    step(TrainBatch(step=1, micro_batches=[]))  # explored (the default): keeps the first weights
    explored = _weights(model)
    assert not step(TrainBatch(step=2, micro_batches=[], explored=True))  # keeps the weights after step 1
    assert not step(TrainBatch(step=3, micro_batches=[], explored=False))  # mostly without signal: not kept
    assert step(TrainBatch(step=4, micro_batches=[], rollback=True))
    assert all(torch.equal(a, b) for a, b in zip(explored, _weights(model)))
    assert changes == [4] and optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * 1e-2)


def test_a_restart_goes_back_to_the_first_weights_past_explored_batches():
    """`rollback_to = "start"`: the copy is the weights the trainer started from; explored batches do not replace
    it."""
    model = tiny_model()
    optimizer = build_optimizer(model, lr=1e-2)
    scheduler = build_scheduler(optimizer)
    first = _weights(model)
    rollback = Rollback(model, lr_factor=0.5, follow_explored=False)
    for step in (1, 2):
        assert not rollback.before_step(TrainBatch(step=step, micro_batches=[], explored=True), optimizer, scheduler,
                                        lambda: None)
        sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
        train_step(model, optimizer, scheduler, pack([sample], 64), truncated.token_loss)
    assert any(not torch.equal(a, b) for a, b in zip(first, _weights(model)))
    assert rollback.before_step(TrainBatch(step=3, micro_batches=[], rollback=True), optimizer, scheduler,
                                lambda: None)
    assert all(torch.equal(a, b) for a, b in zip(first, _weights(model)))


def test_only_trainable_weights_are_kept():
    model = tiny_model()
    for p in list(model.parameters())[1:]:
        p.requires_grad_(False)
    rollback = Rollback(model, lr_factor=0.5)
    assert len(rollback.kept) == 1 and rollback.kept[0].device.type == "cpu"


def test_an_fsdp2_rank_keeps_and_restores_its_own_shards(tmp_path):
    import torch.distributed as dist

    from looprl.trainer import parallel

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        model = parallel.prepare(tiny_model(), parallel.Ranks(distributed=True))
        assert all(type(p).__name__ == "DTensor" for p in model.parameters())
        optimizer = build_optimizer(model, lr=1e-2)
        scheduler = build_scheduler(optimizer)
        rollback = Rollback(model, lr_factor=0.5)
        kept = [p.to_local().detach().clone() for p in model.parameters()]
        sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
        train_step(model, optimizer, scheduler, pack([sample], 64), truncated.token_loss)
        assert any(not torch.equal(a, p.to_local()) for a, p in zip(kept, model.parameters()))
        rollback.restore(optimizer, scheduler)
        assert all(torch.equal(a, p.to_local()) for a, p in zip(kept, model.parameters()))
    finally:
        dist.destroy_process_group()
