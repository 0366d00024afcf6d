"""Trainer config: variants by `type`, cross-field checks, and the functions they select."""

import math

import pytest
import torch

from looprl.config import TrainerConfig, load_config
from looprl.errors import UserError
from looprl.trainer.loss import select


def test_defaults_are_truncated_per_token_without_kl():
    config = TrainerConfig()
    log_ratio = torch.tensor([0.5], requires_grad=True)  # ratio e^0.5 = 1.65: past PPO's clip at 1.2
    out = select.token_loss(config.loss)(log_ratio, torch.tensor([1.0]))
    assert out.loss.item() == pytest.approx(-math.exp(0.5))  # weight min(ratio, 2), not clipped at 1.2
    out.loss.sum().backward()
    assert log_ratio.grad.item() == pytest.approx(-math.exp(0.5))  # a lagged token still gets its gradient
    assert select.normalize(config.loss)([torch.tensor([True, True])])[0].tolist() == [0.5, 0.5]
    assert config.loss.kl_coef == 0.0


def test_truncated_and_constant_from_overrides():
    config = load_config(TrainerConfig, ["--loss.ratio.type", "truncated", "--loss.ratio.cap", "1.5",
                                         "--loss.normalization", "constant", "--loss.normalization_constant", "4"])
    out = select.token_loss(config.loss)(torch.tensor([1.0]), torch.tensor([1.0]))
    assert out.loss.item() == pytest.approx(-1.5)
    assert select.normalize(config.loss)([torch.tensor([True, False])])[0].tolist() == [0.25, 0.0]


def test_masked_from_overrides():
    config = load_config(TrainerConfig, ["--loss.ratio.type", "masked", "--loss.ratio.high", "4"])
    out = select.token_loss(config.loss)(torch.log(torch.tensor([3.0, 0.25])), torch.tensor([1.0, 1.0]))
    assert out.loss.tolist() == pytest.approx([-3.0, 0.0])  # 3 inside [0.5, 4]; 0.25 masked


def test_cispo_from_overrides():
    config = load_config(TrainerConfig, ["--loss.ratio.type", "cispo", "--loss.ratio.low", "0.5"])
    out = select.token_loss(config.loss)(torch.log(torch.tensor([8.0, 0.25])), torch.tensor([1.0, 1.0]))
    assert out.loss.tolist() == pytest.approx([-5.0, -0.5])  # weights clipped to [0.5, 5]
    assert not select.sequence_level(config.loss)


def test_gspo_is_the_clip_at_sequence_level():
    config = load_config(TrainerConfig, ["--loss.ratio.type", "gspo"])
    assert select.sequence_level(config.loss)
    out = select.token_loss(config.loss)(torch.tensor([1e-3, -1e-4]), torch.tensor([1.0, 1.0]))
    assert out.loss.tolist() == pytest.approx([-(1 + 4e-4), -math.exp(-1e-4)])  # clipped at 1 + 4e-4; inside


@pytest.mark.parametrize(("argv", "message"), [
    (["--loss.normalization", "constant"], "needs normalization_constant"),
    (["--loss.ratio.type", "truncated", "--loss.ratio.eps_low", "0.1"], "loss.ratio.truncated.eps_low"),
    (["--optim.lr", "0"], "optim.lr"),
])
def test_bad_values_name_the_key(argv, message):
    with pytest.raises(UserError, match=message):
        load_config(TrainerConfig, argv)
