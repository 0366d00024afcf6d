"""Trainer config: variants by `type`, cross-field checks, and the functions they select."""

import pytest
import torch

from looprl.config import TrainerConfig, load_config
from looprl.errors import UserError
from looprl.trainer.loss import select


def test_defaults_are_clipped_per_token_without_kl():
    config = TrainerConfig()
    out = select.token_loss(config.loss)(torch.tensor([0.5]), torch.tensor([1.0]))
    assert out.loss.item() == pytest.approx(-1.2)  # ratio e^0.5 clipped at 1.2
    assert select.normalize(config.loss)([torch.tensor([True, True])])[0].tolist() == [0.5, 0.5]
    assert config.loss.kl_coef == 0.0


def test_truncated_and_constant_from_overrides():
    config = load_config(TrainerConfig, ["--loss.ratio.type", "truncated", "--loss.ratio.cap", "1.5",
                                         "--loss.normalization", "constant", "--loss.normalization_constant", "4"])
    out = select.token_loss(config.loss)(torch.tensor([1.0]), torch.tensor([1.0]))
    assert out.loss.item() == pytest.approx(-1.5)
    assert select.normalize(config.loss)([torch.tensor([True, False])])[0].tolist() == [0.25, 0.0]


@pytest.mark.parametrize(("argv", "message"), [
    (["--loss.normalization", "constant"], "needs normalization_constant"),
    (["--loss.ratio.type", "truncated", "--loss.ratio.eps_low", "0.1"], "loss.ratio.truncated.eps_low"),
    (["--optim.lr", "0"], "optim.lr"),
])
def test_bad_values_name_the_key(argv, message):
    with pytest.raises(UserError, match=message):
        load_config(TrainerConfig, argv)
