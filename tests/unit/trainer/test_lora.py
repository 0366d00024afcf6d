"""LoRA: only adapters train, broadcasts carry merged full weights, checkpoints restore the adapters."""

import torch
from safetensors.torch import load_file
from tests.support.tiny_model import tiny_model

from looprl.config import LoraConfig
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.trainer.broadcast import broadcast_weights
from looprl.trainer.checkpoint import load_trainer_state, load_weights, save_checkpoint
from looprl.trainer.lora import add_lora
from looprl.trainer.loss import clipped
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.step import train_step

SAMPLE = TrainingSample(rollout_id="r", token_ids=[5, 9, 3, 7, 20], loss_mask=[False, False, True, True, True],
                        inference_logprobs=[0.0, 0.0, -4.0, -4.0, -4.0], advantage=1.0)
CFG = LoraConfig(rank=4, alpha=8, target_modules=["q_proj", "v_proj"])


def _lora_trained(steps: int):
    model = add_lora(tiny_model(), CFG)
    optimizer = build_optimizer(model, lr=1e-2)
    scheduler = build_scheduler(optimizer)
    for _ in range(steps):
        train_step(model, optimizer, scheduler, pack([SAMPLE], 16), clipped.token_loss)
    return model, optimizer, scheduler


def test_only_adapters_train_and_the_broadcast_is_the_merged_model(tmp_path):
    base = {k: v.clone() for k, v in tiny_model().state_dict().items()}
    model, _, _ = _lora_trained(2)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    target = broadcast_weights(tmp_path, 1, model)
    assert any("lora_" in n for n, _ in model.named_parameters())  # training goes on with separate adapters
    weights = load_file(target / "model.safetensors")
    assert set(weights) <= set(base) and not any("lora" in k for k in weights)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(weights[q], base[q])  # the adapters' update is merged in
    k = "model.layers.0.self_attn.k_proj.weight"
    assert torch.equal(weights[k], base[k])  # no adapter there


def test_a_lora_checkpoint_restores_the_adapters(tmp_path, tokenizer):
    model, optimizer, scheduler = _lora_trained(2)
    save_checkpoint(tmp_path, 2, model, tokenizer, optimizer, scheduler)
    fresh = add_lora(tiny_model(), CFG)
    fresh_opt = build_optimizer(fresh, lr=1e-2)
    load_weights(tmp_path, 2, fresh)
    load_trainer_state(tmp_path, 2, fresh, fresh_opt, build_scheduler(fresh_opt))
    trained = dict(model.named_parameters())
    for name, param in fresh.named_parameters():
        assert torch.equal(param, trained[name]), name
