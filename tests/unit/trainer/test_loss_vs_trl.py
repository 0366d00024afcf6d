"""Gradient checks against TRL's GRPOTrainer loss: same model weights, same batch (a shared prompt,
completions of different lengths, behaviour logprobs off the model's), parameter gradients equal.

TRL computes the loss on padded [batch, completion] tensors, looprl on a packed tree row; the
objectives and normalisations that correspond (TRL `loss_type` / `importance_sampling_level`):

- GSPO:    TRL "grpo" at sequence level     = looprl `gspo` with `per_sequence`
- CISPO:   TRL "cispo" (epsilon_high = cap) = looprl `cispo` (low 0) with `per_token`
- GRPO:    TRL "grpo" at token level        = looprl `clipped` with `per_sequence`
- DAPO:    TRL "dapo"                        = looprl `clipped` with `per_token`
"""

from functools import partial

import pytest
import torch
from tests.support.tiny_model import tiny_model, tiny_tokenizer

from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.loss import cispo, clipped, normalization
from looprl.trainer.optim import build_scheduler
from looprl.trainer.step import train_step

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

PROMPT = [5, 9, 3]
COMPLETIONS = [[20, 21, 22, 1], [30, 31, 1], [40, 41, 42, 43], [50, 1]]
ADVANTAGES = [1.0, -0.5, 0.25, -0.75]


class GradientCapture(torch.optim.SGD):
    """An optimizer that keeps the gradients `train_step` computed and changes nothing (lr 0)."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        super().__init__(params, lr=0.0)
        self.grads: list[torch.Tensor] = []

    def step(self, closure=None):  # type: ignore[override]
        self.grads = [p.grad.clone() for group in self.param_groups for p in group["params"]]


def _behaviour_logprobs(spread: float) -> list[list[float]]:
    """Each completion token's logprob under the model, moved by seeded noise (the engine's mismatch)."""
    model, out = tiny_model(), []
    generator = torch.Generator().manual_seed(1)
    for completion in COMPLETIONS:
        ids = PROMPT + completion
        with torch.no_grad():
            logprobs, _ = token_logprobs(model, torch.tensor(ids), torch.arange(len(ids)))
        noise = spread * torch.randn(len(completion), generator=generator)
        out.append((logprobs[len(PROMPT):] + noise).tolist())
    return out


def _trl_gradients(behaviour: list[list[float]], **config) -> list[torch.Tensor]:
    args = trl.GRPOConfig(output_dir="/tmp/looprl-trl-check", per_device_train_batch_size=len(COMPLETIONS),
                          num_generations=len(COMPLETIONS), beta=0.0, report_to=[], use_cpu=True, bf16=False,
                          max_completion_length=8, **config)
    model = tiny_model()
    trainer = trl.GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions), args=args,
                              train_dataset=datasets.Dataset.from_dict({"prompt": ["t2"] * len(COMPLETIONS)}),
                              processing_class=tiny_tokenizer())
    trainer.current_gradient_accumulation_steps = 1
    width = max(len(c) for c in COMPLETIONS)
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in COMPLETIONS])
    inputs = {
        "prompt_ids": torch.tensor([PROMPT] * len(COMPLETIONS)),
        "prompt_mask": torch.ones(len(COMPLETIONS), len(PROMPT), dtype=torch.long),
        "completion_ids": torch.tensor([c + [0] * (width - len(c)) for c in COMPLETIONS]),
        "completion_mask": completion_mask,
        "advantages": torch.tensor(ADVANTAGES),
        "old_per_token_logps": torch.tensor([b + [0.0] * (width - len(b)) for b in behaviour]),
        "num_items_in_batch": completion_mask.sum(),
    }
    model.train()
    trainer._compute_loss(model, inputs).backward()
    return [p.grad.clone() for p in model.parameters()]


def _looprl_gradients(behaviour: list[list[float]], token_loss, normalize,
                      sequence_level: bool) -> tuple[list[torch.Tensor], float]:
    """The parameter gradients of looprl's train step, and the share of tokens whose ratio it clipped."""
    samples = [TrainingSample(rollout_id=f"r{i}", token_ids=PROMPT + c, advantage=a,
                              loss_mask=[False] * len(PROMPT) + [True] * len(c),
                              inference_logprobs=[0.0] * len(PROMPT) + b)
               for i, (c, a, b) in enumerate(zip(COMPLETIONS, ADVANTAGES, behaviour))]
    micro_batches = pack(samples, 64)
    assert len(micro_batches) == 1 and micro_batches[0].trees[0].branches  # one row, the prompt shared
    model = tiny_model()
    optimizer = GradientCapture(list(model.parameters()))
    metrics = train_step(model, optimizer, build_scheduler(optimizer), micro_batches, token_loss, normalize,
                         max_grad_norm=1e9, sequence_level=sequence_level)
    return optimizer.grads, metrics["clipped_frac"]


@pytest.mark.parametrize(("trl_config", "token_loss", "normalize", "sequence_level", "spread"), [
    ({"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 0.03, "epsilon_high": 0.04},
     partial(clipped.token_loss, eps_low=0.03, eps_high=0.04), normalization.per_sequence, True, 0.1),
    ({"loss_type": "cispo", "epsilon_high": 1.5}, partial(cispo.token_loss, low=0.0, high=1.5),
     normalization.per_token, False, 0.5),
    ({"loss_type": "grpo", "epsilon": 0.2}, clipped.token_loss, normalization.per_sequence, False, 0.3),
    ({"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28}, partial(clipped.token_loss, eps_high=0.28),
     normalization.per_token, False, 0.3),
], ids=["gspo", "cispo", "grpo", "dapo"])
def test_gradients_equal_trl(trl_config, token_loss, normalize, sequence_level, spread):
    behaviour = _behaviour_logprobs(spread)
    theirs = _trl_gradients(behaviour, **trl_config)
    ours, clipped_frac = _looprl_gradients(behaviour, token_loss, normalize, sequence_level)
    assert 0 < clipped_frac < 1  # the batch exercises the clip and the unclipped path
    assert max(float(g.abs().max()) for g in ours) > 1e-3  # a real gradient, not two zeros
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
