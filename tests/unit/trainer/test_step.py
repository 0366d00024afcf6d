"""The train step: it learns in the advantage's direction, and packing does not change the loss."""

import pytest
import torch
from tests.support.tiny_model import tiny_model

from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.loss import clipped, masked, normalization, truncated
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.step import train_step


def _on_policy_sample(model, ids: list[int], prompt_len: int, advantage: float) -> TrainingSample:
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, torch.tensor(ids), torch.arange(len(ids)))
    mask = [i >= prompt_len for i in range(len(ids))]
    return TrainingSample(rollout_id="r", token_ids=ids, loss_mask=mask, advantage=advantage,
                          inference_logprobs=[lp if m else 0.0 for lp, m in zip(logprobs.tolist(), mask)])


def _completion_logprob(model, sample: TrainingSample) -> float:
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, torch.tensor(sample.token_ids), torch.arange(len(sample.token_ids)))
    return float(logprobs[torch.tensor(sample.loss_mask)].sum())


@pytest.mark.parametrize("token_loss", [clipped.token_loss, truncated.token_loss, masked.token_loss])
def test_step_moves_logprobs_with_the_advantage(model, token_loss):
    good = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
    bad = _on_policy_sample(model, [5, 9, 3, 7, 30, 31, 32], 4, advantage=-1.0)
    before = _completion_logprob(model, good), _completion_logprob(model, bad)
    optimizer = build_optimizer(model, lr=1e-2)
    metrics = train_step(model, optimizer, build_scheduler(optimizer), pack([good, bad], 64), token_loss)
    assert _completion_logprob(model, good) > before[0]
    assert _completion_logprob(model, bad) < before[1]
    assert metrics["loss_tokens"] == 6 and metrics["tokens"] == 10  # the shared 4-token prompt counted once
    assert metrics["grad_norm"] > 0 and metrics["lr"] == pytest.approx(1e-2)
    assert metrics["entropy"] > 0


@pytest.mark.parametrize("normalize", [normalization.per_token, normalization.per_sequence,
                                       lambda masks: normalization.constant(masks, 10.0)])
def test_loss_does_not_depend_on_packing(normalize):
    model = tiny_model()
    samples = [_on_policy_sample(model, list(range(2, 2 + n)), 2, advantage=a)
               for n, a in [(9, 1.0), (5, -0.5), (7, 0.25), (4, -1.0)]]
    losses = []
    for budget in (64, 10):
        model = tiny_model()
        optimizer = build_optimizer(model, lr=0.0)
        micro_batches = pack(samples, budget)
        losses.append(train_step(model, optimizer, build_scheduler(optimizer), micro_batches,
                                 clipped.token_loss, normalize)["loss"])
    assert len(pack(samples, 10)) > 1
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)


def test_warmup_scales_the_learning_rate(model):
    optimizer = build_optimizer(model, lr=1.0)
    scheduler = build_scheduler(optimizer, warmup_steps=4)
    lrs = []
    for _ in range(6):
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("schedule,expected", [
    ("constant", [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]),
    ("linear", [0.5, 1.0, 1.0, 0.8, 0.6, 0.4]),  # from 1 after the warmup's 2 steps to 0 at max_steps = 7
    ("cosine", [0.5, 1.0, 1.0, 0.9045, 0.6545, 0.3455]),
])
def test_schedules_decay_the_learning_rate_to_its_floor_at_max_steps(model, schedule, expected):
    optimizer = build_optimizer(model, lr=1.0)
    scheduler = build_scheduler(optimizer, warmup_steps=2, schedule=schedule, max_steps=7)
    lrs = []
    for _ in range(6):
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx(expected, abs=1e-4)
    floor = build_scheduler(build_optimizer(model, lr=1.0), schedule=schedule, max_steps=4, min_lr_ratio=0.1)
    assert floor.lr_lambdas[0](4) == floor.lr_lambdas[0](9) == pytest.approx(1.0 if schedule == "constant" else 0.1)


def test_entropy_bonus_raises_the_entropy_and_reports_its_term(model):
    sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=0.0)  # no policy gradient
    ids = torch.tensor(sample.token_ids)

    def entropy() -> float:
        with torch.no_grad():
            _, h = token_logprobs(model, ids, torch.arange(len(ids)), torch.tensor(sample.loss_mask), with_entropy=True)
        return float(h[torch.tensor(sample.loss_mask)].mean())

    before = entropy()
    optimizer = build_optimizer(model, lr=1e-2)
    metrics = train_step(model, optimizer, build_scheduler(optimizer), pack([sample], 64), truncated.token_loss,
                         entropy_coef=0.1)
    assert metrics["entropy_bonus"] == pytest.approx(0.1 * metrics["entropy"], rel=1e-5)  # per-token mean
    assert metrics["loss"] == pytest.approx(-metrics["entropy_bonus"], rel=1e-5)
    assert entropy() > before


def test_a_rollout_correction_reports_its_weights(model):
    from functools import partial

    from looprl.trainer.loss import correction

    sample = _on_policy_sample(model, [5, 9, 3, 7, 20, 21, 22], 4, advantage=1.0)
    sample.inference_logprobs[5] -= 2.0  # the engine put this token at e^-2 of the trainer's probability
    optimizer = build_optimizer(model, lr=1e-2)
    metrics = train_step(model, optimizer, build_scheduler(optimizer), pack([sample], 64), truncated.token_loss,
                         correction=partial(correction.tis, cap=2.0))
    assert metrics["is_truncated_frac"] == pytest.approx(1 / 3)  # rho = e^2 on one of 3 loss tokens
    assert metrics["is_weight"] == pytest.approx((1 + 2 + 1) / 3, abs=1e-4)
    assert metrics["is_masked_frac"] == 0.0
    plain = train_step(model, optimizer, build_scheduler(optimizer), pack([sample], 64), truncated.token_loss)
    assert "is_weight" not in plain


def test_a_larger_adam_epsilon_keeps_parameters_with_tiny_gradients_nearly_still():
    """`trainer.optim.eps`: with the default a gradient of 1e-7 moves its parameter by about lr, as a large one
    does; with eps 1e-4 by about lr * 1e-3 (the first AdamW step moves by lr * g / (|g| + eps))."""
    moved = {}
    for eps in (1e-8, 1e-4):
        weight = torch.nn.Parameter(torch.zeros(2))
        optimizer = build_optimizer(torch.nn.ParameterList([weight]), lr=1.0, eps=eps)
        weight.grad = torch.tensor([1e-7, 1.0])
        optimizer.step()
        moved[eps] = (-weight.detach()).tolist()
    assert moved[1e-8] == pytest.approx([0.9, 1.0], rel=0.1)
    assert moved[1e-4][0] == pytest.approx(1e-3, rel=0.01) and moved[1e-4][1] == pytest.approx(1.0, rel=1e-3)
