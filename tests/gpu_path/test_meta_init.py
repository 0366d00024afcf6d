"""Meta-device init of the FSDP ranks (issue 33, defect 4): every rank but 0 builds the policy and the KL
reference model on the meta device and receives rank 0's weights as the model is sharded, so no rank but 0
ever holds the whole model (8 ranks of a 7B model each loading it whole in float32 is 224 GB of host RAM).

Two gloo ranks on the CPU, as torchrun starts them: the meta-initialised sharded model holds exactly the weights
and buffers of a plain load and computes rank 0's logprobs (tied embeddings, the rotary buffers transformers
computes at init, LoRA adapters added after the load, bfloat16 layers, the bundled SmolLM2 converted from GGUF),
and rank 1's memory never grows by the model's size."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.support.gloo_ranks import run_ranks
from tests.support.setup_memory import setup_peaks
from tests.support.tiny_model import tiny_model, tiny_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from looprl.config import LoraConfig
from looprl.model_loading import DEFAULT_MODEL, resolve_model
from looprl.trainer import parallel
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.lora import add_lora
from looprl.trainer.model import as_reference, load_policy

IDS, POSITIONS = torch.tensor([5, 9, 3, 7, 2, 11, 4]), torch.arange(7)


def _save_tiny(path: Path) -> Path:
    model = tiny_model(seed=3)
    model.save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


CASES = [("tiny", False), ("tiny", True), (DEFAULT_MODEL, False)]
"""(model, LoRA): the tiny model (tied embeddings) with and without adapters, and the bundled SmolLM2 (converted
from its GGUF file)."""


def _logprobs_on_ranks(rank: int, models: dict[str, str], out: str) -> None:
    ranks = parallel.setup("cpu", "bfloat16")
    assert ranks.on_meta == (rank == 1)
    for name, lora in CASES:
        _policy_and_reference(rank, ranks, models[name], lora, Path(out) / f"rank{rank}_{name}_{lora}.pt")
    parallel.teardown(ranks)


def _policy_and_reference(rank: int, ranks: parallel.Ranks, model_dir: str, lora: bool, out: Path) -> None:
    torch.manual_seed(1)  # LoRA's initial adapters, drawn on rank 0 only
    model, _ = load_policy(model_dir, on_meta=ranks.on_meta)
    assert all(p.is_meta for p in model.parameters()) == (rank == 1)
    if lora:
        model = add_lora(model, LoraConfig(rank=4, alpha=8, dropout=0.0))
    model = parallel.prepare(model, ranks)
    reference = parallel.prepare(as_reference(load_policy(model_dir, on_meta=ranks.on_meta)[0]), ranks)
    params = {name: p.full_tensor() for name, p in model.named_parameters()}  # before a forward unshards the root
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    logprobs = [token_logprobs(m, IDS, POSITIONS)[0] for m in (model, reference)]
    torch.save({"logprobs": logprobs, "buffers": buffers, "params": params}, out)


@pytest.fixture(scope="module")
def ranks_output(tmp_path_factory) -> tuple[dict[str, str], Path]:
    """The models, and what each of two ranks computed from each case (one spawn for all)."""
    out = tmp_path_factory.mktemp("meta_init")
    models = {"tiny": str(_save_tiny(out / "tiny")), DEFAULT_MODEL: DEFAULT_MODEL}
    run_ranks(_logprobs_on_ranks, models, str(out))
    return models, out


def _plain(model_dir: str, lora: bool) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One process, the model loaded whole: the buffers and parameters every rank must hold."""
    torch.manual_seed(1)
    model, _ = load_policy(model_dir)
    if lora:
        model = add_lora(model, LoraConfig(rank=4, alpha=8, dropout=0.0))
    return dict(model.named_buffers()), {name: p.detach() for name, p in model.named_parameters()}


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("name", "lora"), CASES)
def test_meta_initialised_ranks_equal_a_plain_load(ranks_output, name, lora):
    """Every parameter and buffer of both ranks' sharded models equals a plain load's, and rank 1 (meta) computes
    rank 0's logprobs (a plain load, sharded) bit for bit, the policy's and the reference's."""
    models, out = ranks_output
    buffers, params = _plain(models[name], lora)
    assert any("inv_freq" in key for key in buffers)
    got = [torch.load(out / f"rank{rank}_{name}_{lora}.pt") for rank in (0, 1)]
    for rank in got:
        assert rank["buffers"].keys() == buffers.keys() and rank["params"].keys() == params.keys()
        for key, buffer in buffers.items():
            torch.testing.assert_close(rank["buffers"][key], buffer, rtol=0, atol=0, msg=key)
        for key, param in params.items():  # the adapters too: drawn on rank 0, the same on every rank
            torch.testing.assert_close(rank["params"][key], param, rtol=0, atol=0, msg=key)
        policy, reference = rank["logprobs"]
        torch.testing.assert_close(reference, policy, rtol=0, atol=0)
        assert torch.isfinite(policy).all()
    torch.testing.assert_close(got[1]["logprobs"], got[0]["logprobs"], rtol=0, atol=0)


def _save_random(path: Path) -> float:
    """A random-weight model of SmolLM2-135M's shapes (576 wide, 30 layers, 9 heads, 3 KV heads) with an 8k
    vocabulary, so that the largest tensor (the one a rank holds whole while it is broadcast) is 4 % of the
    model: its size in MiB (444)."""
    config = LlamaConfig(vocab_size=8192, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         tie_word_embeddings=True, rope_theta=100000.0)
    LlamaForCausalLM(config).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return (path / "model.safetensors").stat().st_size / 2**20


@pytest.mark.timeout(150)
def test_rank_1_never_holds_the_whole_model(tmp_path):
    size = _save_random(tmp_path / "model")
    rank0, rank1 = setup_peaks(str(tmp_path / "model"), tmp_path / "memory")
    print(f"model {size:.0f} MiB; rank 0 {rank0}; rank 1 {rank1}")
    # rank 1 keeps its half of each model and receives one whole tensor at a time: ~half the model's size
    # (before meta init it loaded each model whole first: more than its size)
    assert rank1["policy"] < 0.75 * size and rank1["reference"] < 0.75 * size, (size, rank1)


def _convert_on_rank_1_first(rank: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    if rank == 1:
        resolve_model(DEFAULT_MODEL)
    dist.barrier()
    converted = resolve_model(DEFAULT_MODEL)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in converted.iterdir()}
    dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_a_rank_other_than_0_converts_the_bundled_model(monkeypatch, tmp_path):
    """A fresh cache and a multi-rank trainer: whichever rank gets the lock converts the GGUF. Rank 1 first here,
    under an initialised process group, where transformers' `save_pretrained` writes on rank 0 only (it published a
    directory holding the tokenizer alone, and every rank then failed to load it)."""
    monkeypatch.setenv("LOOPRL_CACHE", str(tmp_path))
    run_ranks(_convert_on_rank_1_first)
    config = (tmp_path / "models" / DEFAULT_MODEL / "config.json").read_text()
    assert '"LlamaForCausalLM"' in config and '"model_type": "llama"' in config
