"""Rollout correction (TIS / MIS, token and sequence level) against values computed by hand, and its
place in the loss: separate from the objective, whose ratio it moves to the trainer's own logprobs."""

import math

import pytest
import torch

from looprl.config import TrainerConfig, load_config
from looprl.trainer.loss import clipped, correction, policy_loss, select


def _log(*values: float) -> torch.Tensor:
    return torch.log(torch.tensor(values, dtype=torch.float64))


def test_token_tis_truncates_the_weight():
    out = correction.tis(_log(3.0, 0.5), torch.tensor([0, 1]), cap=2.0)
    assert out.weight.tolist() == pytest.approx([2.0, 0.5])
    assert out.truncated.tolist() == [True, False] and not out.masked.any()


def test_sequence_tis_weighs_each_sequence_by_its_product_of_ratios():
    # sequence 0: 1.5 * 2 = 3 -> truncated at 2 on both tokens; sequence 1: 0.5; the -1 token is off the mask
    out = correction.tis(_log(1.5, 2.0, 0.5, 7.0), torch.tensor([0, 0, 1, -1]), cap=2.0, level="sequence")
    assert out.weight[:3].tolist() == pytest.approx([2.0, 2.0, 0.5])
    assert out.truncated[:3].tolist() == [True, True, False]


def test_token_mis_drops_tokens_outside_the_band():
    out = correction.mis(_log(3.0, 0.25, 1.5), torch.tensor([0, 0, 0]), low=0.5, high=2.0)
    assert out.weight.tolist() == pytest.approx([0.0, 0.0, 1.5])
    assert out.masked.tolist() == [True, True, False] and not out.truncated.any()


def test_sequence_mis_drops_whole_sequences():
    # sequence 0: 1.5 * 1.5 = 2.25 > 2, masked although each token is inside; sequence 1: 0.9 kept
    out = correction.mis(_log(1.5, 1.5, 0.9), torch.tensor([0, 0, 1]), low=0.5, high=2.0, level="sequence")
    assert out.weight.tolist() == pytest.approx([0.0, 0.0, 0.9])
    assert out.masked.tolist() == [True, True, False]


def test_with_a_correction_the_objective_ratio_is_the_trainers_own():
    logprobs = _log(0.6).requires_grad_()
    inference = _log(0.2)  # the engine's mismatch: ratio 3
    advantages, weights = torch.ones(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    plain = policy_loss(clipped.token_loss, logprobs, inference, advantages, weights)
    assert plain.clipped == 1 and torch.autograd.grad(plain.loss, logprobs)[0].item() == 0.0  # PPO's clip: no gradient
    tis = policy_loss(clipped.token_loss, logprobs, inference, advantages, weights,
                                    correction=lambda r, s: correction.tis(r, s, cap=2.0))
    # ratio against logp_old is 1 (nothing clipped); the token's loss is weighted by min(3, 2)
    assert tis.clipped == 0 and tis.truncated == 1 and tis.correction_weight == pytest.approx(2.0)
    assert tis.loss.item() == pytest.approx(-2.0)
    assert torch.autograd.grad(tis.loss, logprobs)[0].item() == pytest.approx(-2.0)


def test_correction_from_the_config():
    assert select.rollout_correction(TrainerConfig().loss) is None
    config = load_config(TrainerConfig, ["--loss.correction.type", "mis", "--loss.correction.level", "sequence",
                                         "--loss.correction.high", "4"])
    out = select.rollout_correction(config.loss)(_log(1.5, 2.0), torch.tensor([0, 0]))
    assert out.weight.tolist() == pytest.approx([3.0, 3.0])  # the product 3 inside [0.5, 4]
    tis = load_config(TrainerConfig, ["--loss.correction.type", "tis", "--loss.correction.cap", "1.5"])
    assert select.rollout_correction(tis.loss)(_log(math.e), torch.tensor([0])).weight.item() == pytest.approx(1.5)


def test_the_configs_scalar_weights_match_the_trainers():
    from looprl.config import MisCorrection, TisCorrection

    log_rhos = [0.4, -0.9, 1.2]
    for config, fn in [(TisCorrection(cap=1.5), correction.tis), (MisCorrection(low=0.5, high=2.0), correction.mis),
                       (TisCorrection(level="sequence", cap=3.0), correction.tis),
                       (MisCorrection(level="sequence", high=4.0), correction.mis)]:
        settings = config.model_dump(exclude={"type"})
        expected = fn(torch.tensor(log_rhos, dtype=torch.float64), torch.zeros(3, dtype=torch.long), **settings)
        assert config.weights(log_rhos) == pytest.approx(expected.weight.tolist())
