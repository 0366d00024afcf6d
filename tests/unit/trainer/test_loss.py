"""The policy loss and its variants against values computed by hand."""

import math

import pytest
import torch

from looprl.trainer.loss import cispo, clipped, gspo, masked, normalization, policy_loss, truncated


def _logps(*probs: float) -> torch.Tensor:
    return torch.tensor([math.log(p) for p in probs], dtype=torch.float64)


def test_clipped_four_cases():
    # ratios 1.5, 0.5, 0.5, 1.5 (eps 0.2) with advantages +1, +1, -1, -1
    logprobs = _logps(0.75, 0.25, 0.25, 0.75).requires_grad_()
    inference = _logps(0.5, 0.5, 0.5, 0.5)
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    weights = torch.full((4,), 0.25, dtype=torch.float64)
    out = policy_loss(clipped.token_loss, logprobs, inference, advantages, weights)
    # per token: -min(1.5, 1.2) = -1.2 | -min(0.5, 0.8) = -0.5 | -min(-0.5, -0.8) = 0.8 | -min(-1.5, -1.2) = 1.5
    assert out.loss.item() == pytest.approx(0.25 * (-1.2 - 0.5 + 0.8 + 1.5))
    assert out.clipped == 2
    out.loss.backward()
    # d/dlogp of -ratio*A is -ratio*A where unclipped, 0 where clipped
    assert logprobs.grad.tolist() == pytest.approx([0.0, 0.25 * -0.5, 0.0, 0.25 * 1.5])


def test_clipped_asymmetric_eps_high():
    logprobs, inference = _logps(0.75), _logps(0.5)  # ratio 1.5
    out = clipped.token_loss(logprobs - inference, torch.tensor([1.0], dtype=torch.float64), eps_low=0.2, eps_high=0.28)
    assert out.loss.item() == pytest.approx(-1.28)


def test_truncated_caps_the_weight_and_keeps_the_gradient():
    logprobs = _logps(0.6, 0.1).requires_grad_()
    inference = _logps(0.2, 0.2)  # ratios 3.0 and 0.5
    advantages = torch.tensor([1.0, -2.0], dtype=torch.float64)
    weights = torch.ones(2, dtype=torch.float64)
    out = policy_loss(lambda r, a: truncated.token_loss(r, a, cap=2.0), logprobs, inference, advantages, weights)
    # value -w*A: -2*1 + -(0.5)*(-2) = -1.0; gradient -w*A per token, even where truncated
    assert out.loss.item() == pytest.approx(-1.0)
    assert out.clipped == 1
    out.loss.backward()
    assert logprobs.grad.tolist() == pytest.approx([-2.0, 1.0])


def test_masked_keeps_the_gradient_past_the_clip_and_drops_outliers():
    # ratios 1.5 (past PPO's 1.2: clipped would give no gradient), 3.0 and 0.25 (outside [0.5, 2]), 0.8
    logprobs = _logps(0.75, 0.6, 0.05, 0.4).requires_grad_()
    inference = _logps(0.5, 0.2, 0.2, 0.5)
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    weights = torch.ones(4, dtype=torch.float64)
    out = policy_loss(masked.token_loss, logprobs, inference, advantages, weights)
    # value -ratio*A on the kept tokens: -1.5 + 0.8
    assert out.loss.item() == pytest.approx(-0.7)
    assert out.clipped == 2
    out.loss.backward()
    # gradient -ratio*A where kept (the importance-weighted policy gradient), 0 where masked
    assert logprobs.grad.tolist() == pytest.approx([-1.5, 0.0, 0.0, 0.8])


def test_masked_band_is_configurable():
    log_ratio = torch.log(torch.tensor([1.5, 3.0], dtype=torch.float64))
    out = masked.token_loss(log_ratio, torch.ones(2, dtype=torch.float64), low=0.125, high=8.0)
    assert out.clipped.tolist() == [False, False]
    assert out.loss.tolist() == pytest.approx([-1.5, -3.0])


def test_cispo_clips_the_weight_on_both_sides_and_keeps_every_gradient():
    logprobs = _logps(0.6, 0.05).requires_grad_()
    inference = _logps(0.1, 0.1)  # ratios 6.0 (above high) and 0.5 (below low)
    advantages = torch.tensor([1.0, -2.0], dtype=torch.float64)
    weights = torch.ones(2, dtype=torch.float64)
    out = policy_loss(lambda r, a: cispo.token_loss(r, a, low=0.8, high=5.0), logprobs, inference, advantages, weights)
    # w = clip(ratio, 0.8, 5): 5 and 0.8; value -w*A = -5 + 1.6; gradient -w*A on both tokens
    assert out.loss.item() == pytest.approx(-3.4)
    assert out.clipped == 2
    out.loss.backward()
    assert logprobs.grad.tolist() == pytest.approx([-5.0, 1.6])


def test_truncated_is_cispo_without_a_lower_clip():
    log_ratio = torch.log(torch.tensor([0.01, 1.5, 3.0], dtype=torch.float64))
    advantages = torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64)
    a, b = truncated.token_loss(log_ratio, advantages, cap=2.0), cispo.token_loss(log_ratio, advantages, 0.0, 2.0)
    assert a.loss.tolist() == b.loss.tolist() and a.clipped.tolist() == b.clipped.tolist() == [False, False, True]


def test_gspo_clips_each_sequence_on_its_geometric_mean_ratio():
    # sequence 0: token ratios 2 and 1 -> s = sqrt(2) ~ 1.414 with A = +1: past 1 + 0.2, clipped, no gradient;
    # sequence 1: token ratios 0.9 and 0.9 -> s = 0.9 with A = -1: inside, -s*A = 0.9 per token
    logprobs = _logps(0.8, 0.4, 0.45, 0.45).requires_grad_()
    inference = _logps(0.4, 0.4, 0.5, 0.5)
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    weights = torch.full((4,), 0.25, dtype=torch.float64)
    sequences = torch.tensor([0, 0, 1, 1])
    out = policy_loss(clipped.token_loss, logprobs, inference, advantages, weights, sequences=sequences,
                      sequence_level=True)
    assert out.loss.item() == pytest.approx(0.25 * (-1.2 * 2 + 0.9 * 2))
    assert out.clipped == 2
    out.loss.backward()
    # each of the sequence's 2 tokens carries 0.25 * -s*A, and d(-s*A)/dlogp_t = -A * s / 2:
    # 2 * 0.25 * 0.9 / 2 per token
    assert logprobs.grad.tolist() == pytest.approx([0.0, 0.0, 0.25 * 0.9, 0.25 * 0.9])


def test_gspo_sequence_ratio_ignores_tokens_off_the_mask():
    log_ratio = torch.tensor([5.0, 0.2, 0.4, -7.0, 0.3])
    mean = gspo.sequence_log_ratio(log_ratio, torch.tensor([-1, 0, 0, -1, 1]))
    assert mean.tolist() == pytest.approx([0.0, 0.3, 0.3, 0.0, 0.3])


def test_on_policy_variants_agree():
    logprobs = _logps(0.3, 0.6).requires_grad_()
    advantages = torch.tensor([0.5, -1.5], dtype=torch.float64)
    weights = torch.tensor([0.5, 0.5], dtype=torch.float64)
    a = policy_loss(clipped.token_loss, logprobs, logprobs.detach(), advantages, weights)
    b = policy_loss(truncated.token_loss, logprobs, logprobs.detach(), advantages, weights)
    c = policy_loss(masked.token_loss, logprobs, logprobs.detach(), advantages, weights)
    assert a.loss.item() == pytest.approx(0.5)
    assert b.loss.item() == pytest.approx(0.5)
    assert c.loss.item() == pytest.approx(0.5)
    ga, = torch.autograd.grad(a.loss, logprobs)
    gb, = torch.autograd.grad(b.loss, logprobs)
    gc, = torch.autograd.grad(c.loss, logprobs)
    assert ga.tolist() == pytest.approx([-0.25, 0.75]) and gb.tolist() == pytest.approx([-0.25, 0.75])
    assert gc.tolist() == pytest.approx([-0.25, 0.75])


def test_tokens_off_the_mask_contribute_nothing_even_with_sentinel_logprobs():
    logprobs = torch.tensor([0.0, math.log(0.5)], dtype=torch.float64, requires_grad=True)
    inference = torch.tensor([-9999.0, math.log(0.5)], dtype=torch.float64)
    weights = torch.tensor([0.0, 1.0], dtype=torch.float64)
    out = policy_loss(clipped.token_loss, logprobs, inference, torch.ones(2, dtype=torch.float64), weights)
    out.loss.backward()
    assert out.loss.item() == pytest.approx(-1.0)
    assert logprobs.grad.tolist() == pytest.approx([0.0, -1.0])


def test_kl_to_reference():
    logprobs, ref = _logps(0.5), _logps(0.25)
    weights = torch.tensor([2.0], dtype=torch.float64)
    out = policy_loss(clipped.token_loss, logprobs, logprobs, torch.zeros(1, dtype=torch.float64), weights,
                      ref_logprobs=ref, kl_coef=0.1)
    kl = 0.5 - math.log(0.5) - 1.0  # exp(ref-logp) - (ref-logp) - 1
    assert out.kl == pytest.approx(kl)
    assert out.loss.item() == pytest.approx(2.0 * 0.1 * kl)


def test_kl_is_off_by_default():
    logprobs = _logps(0.5)
    out = policy_loss(clipped.token_loss, logprobs, logprobs, torch.ones(1, dtype=torch.float64),
                      torch.ones(1, dtype=torch.float64), ref_logprobs=_logps(0.25))
    assert out.kl == 0.0 and out.loss.item() == pytest.approx(-1.0)


def test_entropy_bonus_lowers_the_loss_by_the_weighted_entropy():
    logprobs = _logps(0.5, 0.25, 0.9)
    entropy = torch.tensor([1.0, 2.0, 7.0], dtype=torch.float64, requires_grad=True)
    weights = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)  # the third token is off the mask
    advantages = torch.ones(3, dtype=torch.float64)
    plain = policy_loss(clipped.token_loss, logprobs, logprobs, advantages, weights)
    out = policy_loss(clipped.token_loss, logprobs, logprobs, advantages, weights, entropy=entropy,
                      entropy_coef=0.1)
    bonus = 0.1 * (0.5 * 1.0 + 0.5 * 2.0)  # coef x mean entropy over the loss tokens
    assert out.entropy_bonus == pytest.approx(bonus)
    assert out.loss.item() == pytest.approx(plain.loss.item() - bonus)
    out.loss.backward()
    assert entropy.grad.tolist() == pytest.approx([-0.05, -0.05, 0.0])  # descending the loss raises entropy


def test_entropy_bonus_is_off_by_default():
    logprobs, advantages, weights = _logps(0.5, 0.25), torch.ones(2, dtype=torch.float64), torch.full((2,), 0.5)
    plain = policy_loss(clipped.token_loss, logprobs, logprobs, advantages, weights)
    out = policy_loss(clipped.token_loss, logprobs, logprobs, advantages, weights,
                      entropy=torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert out.entropy_bonus == 0.0 and out.loss.item() == plain.loss.item()


MASKS = [torch.tensor([True, True, False]), torch.tensor([True])]


@pytest.mark.parametrize(("weights", "expected"), [
    (normalization.per_token(MASKS), [[1 / 3, 1 / 3, 0.0], [1 / 3]]),
    (normalization.per_sequence(MASKS), [[1 / 4, 1 / 4, 0.0], [1 / 2]]),
    (normalization.constant(MASKS, 4.0), [[0.25, 0.25, 0.0], [0.25]]),
])
def test_normalizations(weights, expected):
    assert [w.tolist() for w in weights] == [pytest.approx(e) for e in expected]


def test_normalizations_survive_sequences_without_loss_tokens():
    masks = [torch.tensor([False, False])]
    assert normalization.per_token(masks)[0].tolist() == [0.0, 0.0]
    assert normalization.per_sequence(masks)[0].tolist() == [0.0, 0.0]
