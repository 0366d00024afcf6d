"""What rank 0 hands the engine, and how long the other ranks wait for it: broadcasts in the engine's dtype
(checkpoints keep float32), and the process group's timeout from `trainer.dist_timeout_s`."""

from datetime import timedelta

import torch
from safetensors.torch import load_file
from tests.support.tiny_model import tiny_model

from looprl.config import RLConfig, load_config
from looprl.inference.weight_update import load_update
from looprl.paths import checkpoint_dir
from looprl.trainer import parallel
from looprl.trainer.broadcast import broadcast_dtype, broadcast_weights
from looprl.trainer.checkpoint import save_checkpoint
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.parallel import Ranks


def test_broadcasts_are_written_in_the_engines_dtype_and_checkpoints_keep_float32(tmp_path, tokenizer):
    """On a GPU the engine runs bfloat16: the broadcast is half the bytes of the float32 master weights. The
    checkpoint of the same step, which used to hard-link the broadcast's file, must still hold float32."""
    model = tiny_model()
    assert broadcast_dtype("auto", Ranks(device=torch.device("cuda", 0))) == torch.bfloat16
    assert broadcast_dtype("auto", Ranks()) == torch.float32 and broadcast_dtype("float16", Ranks()) == torch.float16
    path = broadcast_weights(tmp_path, 1, model, dtype=torch.bfloat16)
    assert {t.dtype for t in load_file(path / "model.safetensors").values()} == {torch.bfloat16}
    engine_model = tiny_model(seed=1).to(torch.bfloat16)
    load_update(path, engine_model).apply(engine_model)
    torch.testing.assert_close(engine_model.model.embed_tokens.weight, model.model.embed_tokens.weight.bfloat16())

    optimizer = build_optimizer(model, lr=1e-2)
    save_checkpoint(tmp_path, 1, model, tokenizer, optimizer, build_scheduler(optimizer), with_optimizer=False)
    saved = load_file(checkpoint_dir(tmp_path, 1) / "model.safetensors")
    for name, tensor in saved.items():
        assert torch.equal(tensor, model.state_dict()[name]), name  # float32, exactly
    same_dtype = broadcast_weights(tmp_path, 2, model)  # float32: the checkpoint still links it
    save_checkpoint(tmp_path, 2, model, tokenizer, optimizer, build_scheduler(optimizer), with_optimizer=False)
    linked = checkpoint_dir(tmp_path, 2) / "model.safetensors"
    assert linked.stat().st_ino == (same_dtype / "model.safetensors").stat().st_ino


def test_the_process_group_waits_as_long_as_configured(monkeypatch):
    """torch's default 10 minutes is less than rank 0 alone may take to write a large model's broadcast and
    checkpoint to a network filesystem while the other ranks wait at the next collective."""
    cfg = load_config(RLConfig, ["--env.source", "x.py:E"])
    assert cfg.trainer.dist_timeout_s >= 3600
    calls = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(parallel.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(parallel.dist, "init_process_group", lambda *a, **k: calls.append(k))
    monkeypatch.setattr(parallel.dist, "get_rank", lambda: 1)
    ranks = parallel.setup("cpu", "auto", timeout_s=5400)
    assert ranks.rank == 1 and calls[0]["timeout"] == timedelta(seconds=5400)


def test_an_adapter_broadcast_gathers_the_adapters_alone(tmp_path, tokenizer):
    """LoRA + vLLM: the broadcast and the checkpoint hold the adapters only, so only they are gathered, not the
    frozen base model (under FSDP2, here one gloo rank: each adapter's DTensor gathered by itself)."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from looprl.config import LoraConfig
    from looprl.trainer.checkpoint import load_weights
    from looprl.trainer.lora import add_lora
    from looprl.trainer.weight_files import full_state_dict

    lora = LoraConfig(rank=4, alpha=8, target_modules=["q_proj", "v_proj"])
    model = add_lora(tiny_model(), lora)
    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        for layer in parallel.decoder_layers(model):
            fully_shard(layer)
        fully_shard(model)
        state = full_state_dict(model, Ranks(), adapters_only=True)
    finally:
        dist.destroy_process_group()
    assert state is not None and set(state) == set(adapters)  # no base weight, not even the tied lm_head
    for name, tensor in state.items():
        assert torch.equal(tensor, adapters[name]) and tensor.device.type == "cpu", name

    plain = add_lora(tiny_model(), lora)
    plain.load_state_dict(state, strict=False)
    path = broadcast_weights(tmp_path, 1, plain, state, adapter_only=True, dtype=torch.bfloat16)
    assert sorted(p.name for p in path.iterdir()) == ["STABLE", "adapter_config.json", "adapter_model.safetensors"]
    optimizer = build_optimizer(plain, lr=1e-2)
    save_checkpoint(tmp_path, 1, plain, tokenizer, optimizer, build_scheduler(optimizer), state=state,
                    with_optimizer=False)
    fresh = add_lora(tiny_model(), lora)
    load_weights(tmp_path, 1, fresh)
    for name, param in fresh.named_parameters():
        if param.requires_grad:
            assert torch.equal(param, adapters[name]), name
