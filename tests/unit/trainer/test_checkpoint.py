"""Checkpoints restore the whole trainer state; broadcasts load into the engine after STABLE."""

import random

import pytest
import torch
from tests.support.tiny_model import tiny_model

from looprl.handoff import is_stable, latest_checkpoint
from looprl.inference.weight_update import load_update
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.paths import broadcast_dir, checkpoint_dir
from looprl.trainer.broadcast import broadcast_weights
from looprl.trainer.checkpoint import load_trainer_state, load_weights, save_checkpoint
from looprl.trainer.loss import clipped
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.rollback import Rollback
from looprl.trainer.step import train_step

SAMPLE = TrainingSample(rollout_id="r", token_ids=[5, 9, 3, 7, 20], loss_mask=[False, False, True, True, True],
                        inference_logprobs=[0.0, 0.0, -4.0, -4.0, -4.0], advantage=1.0)


def _trained(steps: int):
    model = tiny_model()
    optimizer = build_optimizer(model, lr=1e-2)
    scheduler = build_scheduler(optimizer, warmup_steps=3)
    for _ in range(steps):
        train_step(model, optimizer, scheduler, pack([SAMPLE], 16), clipped.token_loss)
    return model, optimizer, scheduler


def test_resume_continues_exactly(tmp_path, tokenizer):
    model, optimizer, scheduler = _trained(2)
    assert latest_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, 2, model, tokenizer, optimizer, scheduler, progress={"epoch": 0, "cursor": 8})
    assert latest_checkpoint(tmp_path) == 2 and (checkpoint_dir(tmp_path, 2) / "config.json").is_file()
    expected_rng = (random.random(), torch.rand(1).item())
    train_step(model, optimizer, scheduler, pack([SAMPLE], 16), clipped.token_loss)
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    fresh = tiny_model(seed=1)
    fresh_opt = build_optimizer(fresh, lr=1e-2)
    fresh_sched = build_scheduler(fresh_opt, warmup_steps=3)
    load_weights(tmp_path, 2, fresh)  # as the trainer resumes: the weights, then (sharded) the trainer state
    progress, _ = load_trainer_state(tmp_path, 2, fresh, fresh_opt, fresh_sched)
    assert progress == {"epoch": 0, "cursor": 8}
    assert (random.random(), torch.rand(1).item()) == expected_rng
    assert fresh_sched.get_last_lr() == pytest.approx([1e-2])
    train_step(fresh, fresh_opt, fresh_sched, pack([SAMPLE], 16), clipped.token_loss)
    for name, tensor in fresh.state_dict().items():
        torch.testing.assert_close(tensor, expected[name])


def test_a_resume_takes_adams_settings_from_the_config_and_its_moments_from_the_checkpoint(tmp_path, tokenizer):
    """`--resume` with another `trainer.optim.{betas,eps,weight_decay}` runs on the new settings (the saved optimizer
    state carries the old ones in its parameter groups), and keeps the saved moments."""
    model, optimizer, scheduler = _trained(2)
    save_checkpoint(tmp_path, 2, model, tokenizer, optimizer, scheduler, progress={})
    fresh = tiny_model(seed=1)
    fresh_opt = build_optimizer(fresh, lr=1e-2, weight_decay=0.1, betas=(0.5, 0.99), eps=1e-5)
    fresh_sched = build_scheduler(fresh_opt, warmup_steps=3)
    load_weights(tmp_path, 2, fresh)
    _, restored = load_trainer_state(tmp_path, 2, fresh, fresh_opt, fresh_sched)
    group = fresh_opt.param_groups[0]
    assert restored and (group["betas"], group["eps"], group["weight_decay"]) == ((0.5, 0.99), 1e-5, 0.1)
    saved = optimizer.state_dict()["state"][0]["exp_avg"]
    torch.testing.assert_close(fresh_opt.state_dict()["state"][0]["exp_avg"], saved)


def test_a_weights_only_checkpoint_resumes_at_the_schedules_learning_rate(tmp_path, tokenizer):
    """Without the optimizer's state (`final_optimizer = false`) the first resumed step still uses the saved
    schedule's learning rate (mid-warmup here, and lowered by a collapse recovery's rollback), not the
    configured one."""
    model, optimizer, scheduler = _trained(1)
    Rollback(model, lr_factor=0.5).restore(optimizer, scheduler)
    train_step(model, optimizer, scheduler, pack([SAMPLE], 16), clipped.token_loss)
    save_checkpoint(tmp_path, 2, model, tokenizer, optimizer, scheduler, with_optimizer=False)
    expected = train_step(model, optimizer, scheduler, pack([SAMPLE], 16), clipped.token_loss)["lr"]
    assert expected == pytest.approx(0.5 * 1e-2)  # warm-up's last step, halved
    fresh = tiny_model()
    fresh_opt = build_optimizer(fresh, lr=1e-2)
    fresh_sched = build_scheduler(fresh_opt, warmup_steps=3)
    _, restored = load_trainer_state(tmp_path, 2, fresh, fresh_opt, fresh_sched)
    assert not restored
    assert train_step(fresh, fresh_opt, fresh_sched, pack([SAMPLE], 16), clipped.token_loss)["lr"] == \
        pytest.approx(expected)


def test_broadcast_loads_into_the_engine_model(tmp_path):
    model, _, _ = _trained(1)
    for step in (1, 2, 3):
        path = broadcast_weights(tmp_path, step, model, keep=2)
    assert is_stable(path) and path == broadcast_dir(tmp_path, 3)
    assert sorted(p.name for p in path.parent.iterdir()) == ["step_2", "step_3"]
    engine_model = tiny_model(seed=1)
    load_update(path, engine_model).apply(engine_model)
    for name, tensor in engine_model.state_dict().items():
        torch.testing.assert_close(tensor, model.state_dict()[name])
    assert engine_model.lm_head.weight.data_ptr() == engine_model.model.embed_tokens.weight.data_ptr()


def test_policy_loads_from_a_checkpoint_directory(tmp_path, tokenizer):
    from looprl.trainer.model import load_policy

    model, optimizer, scheduler = _trained(1)
    path = save_checkpoint(tmp_path, 1, model, tokenizer, optimizer, scheduler)
    loaded, loaded_tokenizer = load_policy(str(path))
    assert loaded.training and not loaded.config.use_cache
    assert loaded_tokenizer.eos_token == "t1"
    torch.testing.assert_close(loaded.lm_head.weight, model.lm_head.weight)


def test_the_cuda_generator_is_restored(tmp_path, tokenizer):
    """No GPU here: `torch.cuda`'s RNG calls are mocked, the rest of the checkpoint is real."""
    from unittest import mock

    from looprl.trainer.checkpoint import load_trainer_state
    from looprl.trainer.parallel import Ranks

    model, optimizer, scheduler = _trained(1)
    on_gpu = Ranks(device=torch.device("cuda", 0))
    saved = torch.arange(16, dtype=torch.uint8)
    with mock.patch.object(torch.cuda, "get_rng_state", return_value=saved):
        save_checkpoint(tmp_path, 1, model, tokenizer, optimizer, scheduler, ranks=on_gpu)
    with mock.patch.object(torch.cuda, "set_rng_state") as restore:
        load_trainer_state(tmp_path, 1, model, optimizer, scheduler, on_gpu)
    (state, device), _ = restore.call_args
    assert torch.equal(state, saved) and device == torch.device("cuda", 0)
