"""The GPU check (`bench/gpu_check.sh`): looprl's GPU paths, one JSON report, no download.

A Qwen3-0.6B-shaped model (28 layers, hidden 1024, vocabulary 151936) with random weights, built
locally (`--model DIR` loads a local HF model instead, for a realistic `mismatch` and `rl`). One section per
stage, in the order they run:

- `rl`: `looprl rl @ examples/demo/rl.toml @ examples/scaling/one_gpu.toml --trainer.dtype bfloat16` on that
  model saved as an HF directory (a word-level tokenizer over its whole vocabulary, ChatML), the demo's
  prompts rewarded by coin flips (`gpu_check_env.py`: a random model's replies would all score alike and
  train nothing): one trainer process beside the embedded engine on the same GPU, two steps that each
  train, with finite losses (`--smoke`: on the CPU, without `one_gpu.toml`);
- `fsdp_tokens_per_s`: `train_step` on packed 16k-token rows, the model `fully_shard`ed under torchrun over
  every GPU (two gloo ranks with `--smoke`), as the trainer's FSDP path runs: tokens of all ranks per second;
- `fsdp`: FSDP2 `fully_shard` on a one-rank process group (NCCL; gloo with `--smoke`): two optimizer
  steps with finite grad norms, every parameter a DTensor, the gathered full state dict's keys equal to
  the unsharded model's;
- `checkpoint`: that sharded model's checkpoint (`save_checkpoint`: DCP optimizer state, RNGs) loaded
  into a fresh optimizer: every optimizer tensor equal, the torch and CUDA generators restored;
- `recompiles`: the KL path (policy and reference model in train mode, the reference's dropout off, as
  the trainer builds it: `trainer.model.as_reference`) over 10 micro-batches of varied length, trees and
  single sequences, flex_attention: compilations in a first pass, new ones in a second pass over the
  same rows (0: nothing left to compile), and flex_attention's compiled variants against torch's
  recompile limit per function (8), past which it falls back to unfused flex_attention, which materialises the scores;
- `mismatch`: the trainer's weights broadcast and loaded into the embedded engine in bfloat16 through
  its weight-update path, a completion sampled there, and the trainer's logprobs of it (bf16 layers,
  fp32 head): `mismatch_kl` is the lag-0 k3 estimate the trainer reports at step 1;
- `block_mask`: `tree_block_mask` at 32k tokens (compiled): its time and peak memory;
- `tokens_per_s`: `train_step` (forward, backward, AdamW) on packed 16k-token rows, bf16 layers over
  fp32 master weights, flex attention (prime-rl publishes 11.9k tokens/s for Qwen3-0.6B at 16k on
  1xH100), and the embedded engine's generation tokens/s (bf16, capped at `--engine-memory-fraction`);
- `peak_mem`: each stage's peak memory in this process (CUDA: `max_memory_allocated`, GiB; CPU:
  resident-memory peak above the stage's start, GiB); `rl` and `fsdp_tokens_per_s` run in processes of
  their own, which it does not count.

`--smoke` runs every stage on the CPU with a tiny random model in float32 (gloo) and writes
the same keys; where a stage needs CUDA its `checked` says what ran instead (flex_attention has no
backward on the CPU: `recompiles` runs forward passes, training stages use sdpa). A test runs it, so
the script does not crash on a GPU for a reason a CPU would have shown.

    PYTHONPATH=src python bench/gpu_check.py --out gpu_check.json [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

STAGES = ("rl", "fsdp_tokens_per_s", "fsdp", "checkpoint", "mismatch", "block_mask", "tokens_per_s", "recompiles")
"""In the order they run: the two that start processes first (this one holds little GPU memory yet), the one
whose compile time is least known last (each writes the report as it ends)."""
RL_TIMEOUT_S, FSDP_TIMEOUT_S = 240, 150
"""The subprocess stages' own limits on a GPU, inside `gpu_check.sh`'s 470 s; the CPU smoke gets `SMOKE_SLACK`
times as long (`looprl rl` starts four processes that each import torch: 4 minutes at load 10 on 2 cores)."""
SMOKE_SLACK = 3
PRIME_RL_TOKENS_PER_S = 11900.0


@dataclass(frozen=True)
class Setup:
    """What differs between the GPU run and the CPU smoke."""

    device: torch.device
    compute_dtype: torch.dtype
    layers: int
    hidden: int
    vocab: int
    row_tokens: int  # tokens_per_s's packed rows
    kl_tokens: tuple[int, int]  # recompiles' micro-batch lengths, shortest and longest
    block_mask_tokens: int
    model_path: str | None

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def limit(self, gpu_seconds: float) -> float:
        """A subprocess stage's time limit: `gpu_seconds` on a GPU, `SMOKE_SLACK` times that on the CPU."""
        return gpu_seconds if self.cuda else gpu_seconds * SMOKE_SLACK

    @property
    def training_attention(self) -> str:
        return "flex_attention" if self.cuda else "sdpa"  # flex_attention has no backward on the CPU


def gpu_setup(model_path: str | None) -> Setup:
    vocab = 151936
    if model_path:  # random token ids must stay inside the real model's vocabulary
        from transformers import AutoConfig

        from looprl.model_loading import resolve_model

        vocab = AutoConfig.from_pretrained(resolve_model(model_path)).vocab_size
    return Setup(torch.device("cuda", 0), torch.bfloat16, 28, 1024, vocab, 16384, (1024, 8192), 32768, model_path)


def smoke_setup() -> Setup:
    return Setup(torch.device("cpu"), torch.float32, 2, 64, 512, 512, (60, 120), 32768, None)


def build_model(setup: Setup, seed: int = 0) -> Any:
    """Float32 on the CPU, as the trainer loads its policy (`parallel.prepare` places it)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    if setup.model_path:
        from looprl.trainer.model import load_policy

        return load_policy(setup.model_path)[0]
    heads = max(setup.hidden // 64, 4)
    config = AutoConfig.for_model("qwen3", vocab_size=setup.vocab, hidden_size=setup.hidden,
                                  intermediate_size=3 * setup.hidden, num_hidden_layers=setup.layers,
                                  num_attention_heads=heads, num_key_value_heads=heads // 2,
                                  head_dim=setup.hidden * 2 // heads, max_position_embeddings=40960,
                                  tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.config.use_cache = False
    return model.train()


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def save_model_dir(setup: Setup, out: Path) -> Path:
    """The random-weight model as a Hugging Face directory `looprl rl` loads like a real one: a word-level
    tokenizer over the whole vocabulary (so every sampled id decodes) with ChatML and `<|im_end|>` as EOS."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL), setup.vocab)})
    raw = Tokenizer(models.WordLevel(vocab, unk_token=SPECIAL[0]))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=SPECIAL[2], pad_token=SPECIAL[0],
                                        unk_token=SPECIAL[0], additional_special_tokens=list(SPECIAL[1:2]))
    tokenizer.chat_template = CHATML
    model = build_model(setup)
    model.config.eos_token_id, model.config.pad_token_id = vocab[SPECIAL[2]], 0
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = vocab[SPECIAL[2]], 0
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def word_tokenizer() -> Any:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                   eos_token="<unk>")


def micro_batch(vocab: int, rng: random.Random, trees: list[tuple[int, int, int]]) -> Any:
    """A packed row of `(prompt, completion, siblings)` trees (siblings 0: one lone sequence)."""
    from looprl.handoff import MicroBatch, Tree

    ids: list[int] = []
    pos: list[int] = []
    mask: list[bool] = []
    layout = []
    for prompt, completion, siblings in trees:
        if siblings == 0:
            pos += range(prompt)
            mask += [False] + [True] * (prompt - 1)
            layout.append(Tree(prefix=prompt))
        else:
            pos += [*range(prompt), *[p for _ in range(siblings) for p in range(prompt, prompt + completion)]]
            mask += [False] * prompt + [True] * (siblings * completion)
            layout.append(Tree(prefix=prompt, branches=[completion] * siblings))
    ids = [rng.randrange(vocab) for _ in pos]
    return MicroBatch(token_ids=ids, position_ids=pos, loss_mask=mask, inference_logprobs=[-2.0] * len(ids),
                      advantages=[rng.choice([-1.0, 1.0]) for _ in ids], trees=layout,
                      rollout_ids=[f"r{i}" for i in range(len(layout))])


def packed_rows(setup: Setup, rows: int) -> list[Any]:
    """`rows` rows of `setup.row_tokens`: trees of a prompt and 8 siblings (1/32 and 3/32 of a row), then
    one lone sequence filling the rest."""
    rng = random.Random(0)
    prompt, completion = setup.row_tokens // 32, 3 * setup.row_tokens // 32
    trees = [(prompt, completion, 8)] * (setup.row_tokens // (prompt + 8 * completion))
    rest = setup.row_tokens - sum(p + s * c for p, c, s in trees)
    return [micro_batch(setup.vocab, rng, [*trees, (rest, 0, 0)] if rest else trees) for _ in range(rows)]


def varied_rows(setup: Setup, count: int = 10) -> list[Any]:
    """`count` micro-batches from `kl_tokens[0]` to `kl_tokens[1]` tokens, alternately a tree row and a
    single sequence (the two attention-mask paths)."""
    rng, (short, long) = random.Random(1), setup.kl_tokens
    out = []
    for i in range(count):
        tokens = short + (long - short) * i // (count - 1)
        quarter = tokens // 4
        trees = [(quarter, quarter, 2), (tokens - 3 * quarter, 0, 0)] if i % 2 == 0 else [(tokens, 0, 0)]
        out.append(micro_batch(setup.vocab, rng, trees))
    return out


class PeakMemory:
    """Peak memory of each stage: CUDA's allocator counter, or the process's resident-memory peak above
    where the stage started (Linux VmHWM, reset before it)."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.gib: dict[str, float] = {}

    def measure(self, stage: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if self.setup.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            Path("/proc/self/clear_refs").write_text("5")
        start = 0.0 if self.setup.cuda else _resident_high_water()
        try:
            return fn()
        finally:
            if self.setup.cuda:
                torch.cuda.synchronize()
                self.gib[stage] = torch.cuda.max_memory_allocated() / 2**30
            else:
                self.gib[stage] = (_resident_high_water() - start) / 2**30

    def report(self) -> dict[str, Any]:
        how = "torch.cuda.max_memory_allocated" if self.setup.cuda else "CPU resident peak above the stage's start"
        return {"measure": how, "gib": self.gib}


def _resident_high_water() -> float:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024.0


class Checks:
    """The stages, sharing the one-rank process group and the sharded model between fsdp and checkpoint."""

    def __init__(self, setup: Setup, scratch: Path) -> None:
        self.setup, self.scratch = setup, scratch
        self.sharded: tuple[Any, Any, Any, Any] | None = None  # model, optimizer, scheduler, ranks

    def rl(self) -> dict[str, Any]:
        """`looprl rl` itself, one trainer process with `--trainer.dtype bfloat16` (defect 1's path: the GPU
        default, with `examples/scaling/one_gpu.toml`), the embedded engine, the demo env, two steps."""
        model_dir = self.setup.model_path or save_model_dir(self.setup, self.scratch / "rl_model")
        run_dir = self.scratch / "rl_run"
        configs = ["@", "examples/demo/rl.toml", *(["@", "examples/scaling/one_gpu.toml"] if self.setup.cuda else [])]
        command = [sys.executable, "-m", "looprl.cli", "rl", *configs, "--model.name", str(model_dir),
                   "--env.source", f"{Path(__file__).parent / 'gpu_check_env.py'}:CoinEnv",
                   "--output_dir", str(run_dir), "--trainer.dtype", "bfloat16", "--max_steps", "2",
                   "--orchestrator.batch_size", "8", "--orchestrator.group_size", "4"]
        done = run_child(command, self.setup.limit(RL_TIMEOUT_S))
        listed = subprocess.run([sys.executable, "-m", "looprl.cli", "metrics", str(run_dir), "--json"],
                                capture_output=True, text=True, timeout=60)
        steps = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
        losses = [step.get("train/loss") for step in steps]
        finite = len(steps) == 2 and all(isinstance(x, float) and math.isfinite(x) for x in losses)
        trained = [int(step.get("samples", 0)) for step in steps]  # 0: every group skipped, nothing trained
        out = {"ok": done.returncode == 0 and finite and all(trained), "returncode": done.returncode,
               "steps": len(steps), "samples_trained": trained, "losses": losses,
               "mismatch_kl": [step.get("train/mismatch_kl") for step in steps],
               "trainer_dtype": "bfloat16", "command": " ".join(command[2:])}
        if not out["ok"]:
            out["output_tail"] = done.stdout[-3000:]
        return out

    def fsdp_tokens_per_s(self) -> dict[str, Any]:
        """`train_step` throughput on the FSDP path as the trainer runs it: torchrun, one rank per GPU (two
        gloo ranks with `--smoke`), every rank's share of the rows, tokens of all ranks over the step time."""
        ranks = torch.cuda.device_count() if self.setup.cuda else 2
        out = self.scratch / "fsdp_tokens_per_s.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
                   __file__, "--fsdp-worker", str(out), *([] if self.setup.cuda else ["--smoke"])]
        done = run_child(command, self.setup.limit(FSDP_TIMEOUT_S))
        if done.returncode != 0 or not out.is_file():
            return {"ok": False, "returncode": done.returncode, "output_tail": done.stdout[-3000:]}
        return json.loads(out.read_text())

    def fsdp(self) -> dict[str, Any]:
        from looprl.trainer import attention, parallel
        from looprl.trainer.loss import clipped
        from looprl.trainer.optim import build_optimizer, build_scheduler
        from looprl.trainer.step import train_step
        from looprl.trainer.weight_files import full_state_dict

        setup = self.setup
        ranks = parallel.Ranks(0, 1, setup.device, setup.compute_dtype, distributed=True)
        model = build_model(setup)
        attention.use(model, setup.training_attention)
        unsharded_keys = set(model.state_dict())
        model = parallel.prepare(model, ranks)
        optimizer = build_optimizer(model, lr=1e-5)
        scheduler = build_scheduler(optimizer)
        rows = packed_rows(setup, 1)
        norms = [train_step(model, optimizer, scheduler, rows, clipped.token_loss, ranks=ranks)["grad_norm"]
                 for _ in range(2)]
        full = full_state_dict(model, ranks)
        assert full is not None
        self.sharded = (model, optimizer, scheduler, ranks)
        return {"ok": all(map(math.isfinite, norms)) and set(full) == unsharded_keys,
                "grad_norms": norms, "all_dtensors": all(type(p).__name__ == "DTensor" for p in model.parameters()),
                "state_dict_keys_equal": set(full) == unsharded_keys, "state_dict_tensors": len(full),
                "parameter_device": str(next(model.parameters()).device)}

    def checkpoint(self) -> dict[str, Any]:
        from looprl.trainer.checkpoint import load_trainer_state, save_checkpoint
        from looprl.trainer.optim import build_optimizer, build_scheduler
        from looprl.trainer.weight_files import full_state_dict

        assert self.sharded is not None, "needs the fsdp stage's model"
        model, optimizer, scheduler, ranks = self.sharded
        run_dir = self.scratch / "checkpoint_run"
        generators = _generator_states(self.setup)
        save_checkpoint(run_dir, 2, model, word_tokenizer(), optimizer, scheduler, state=full_state_dict(model, ranks),
                        ranks=ranks)
        torch.rand(1000, device=self.setup.device)  # both generators move on
        torch.rand(1000)
        fresh = build_optimizer(model, lr=1e-5)
        _, restored = load_trainer_state(run_dir, 2, model, fresh, build_scheduler(fresh), ranks)
        expected, got = _optimizer_tensors(optimizer), _optimizer_tensors(fresh)
        equal = restored and expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in got)
        rng_restored = all(torch.equal(a, b) for a, b in zip(generators, _generator_states(self.setup)))
        return {"ok": bool(equal and rng_restored), "optimizer_tensors": len(got), "optimizer_equal": bool(equal),
                "rng_restored": rng_restored, "generators": ["torch", "cuda"] if self.setup.cuda else ["torch"]}

    def recompiles(self) -> dict[str, Any]:
        import torch._dynamo.utils as dynamo_utils
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
        from torch.nn.attention.flex_attention import flex_attention

        from looprl.trainer import attention, parallel
        from looprl.trainer.logprobs import token_logprobs
        from looprl.trainer.loss import clipped
        from looprl.trainer.model import as_reference
        from looprl.trainer.optim import build_optimizer, build_scheduler
        from looprl.trainer.step import train_step

        setup = self.setup
        ranks = parallel.Ranks(0, 1, setup.device, setup.compute_dtype, distributed=True)  # as trainer.loop in bf16
        policy, reference = build_model(setup), build_model(setup)
        for model in (policy, reference):
            attention.use(model, "flex_attention")
        policy = parallel.prepare(policy, ranks)
        reference = parallel.prepare(as_reference(reference), ranks)  # as trainer.loop builds the KL reference
        optimizer = build_optimizer(policy, lr=1e-6)
        scheduler = build_scheduler(optimizer)
        rows = varied_rows(setup)

        def one_pass() -> None:
            for mb in rows:
                if setup.cuda:  # the trainer's KL path itself: policy pass with grad, reference pass without
                    train_step(policy, optimizer, scheduler, [mb], clipped.token_loss, ref_model=reference,
                               kl_coef=0.05, ranks=ranks)
                    continue
                ids, pos = torch.tensor(mb.token_ids), torch.tensor(mb.position_ids)
                with torch.no_grad():
                    token_logprobs(policy.train(), ids, pos, torch.tensor(mb.loss_mask), mb.trees, with_entropy=True)
                    token_logprobs(reference, ids, pos, torch.tensor(mb.loss_mask), mb.trees)

        def compiled() -> int:
            return int(dynamo_utils.counters["stats"]["unique_graphs"])

        before, start = compiled(), time.perf_counter()
        one_pass()
        first, first_s = compiled() - before, time.perf_counter() - start
        start = time.perf_counter()
        one_pass()
        again = compiled() - before - first
        limit = int(torch._dynamo.config.recompile_limit)
        entries = len(_debug_get_cache_entry_list(flex_attention.__code__))
        return {"ok": again == 0 and entries < limit, "compiled_first_pass": first, "compiled_second_pass": again,
                "flex_attention_cache_entries": entries, "recompile_limit_per_function": limit,
                "first_pass_s": first_s, "second_pass_s": time.perf_counter() - start,
                "micro_batch_tokens": [len(mb.token_ids) for mb in rows],
                "checked": "train_step with kl_coef 0.05 (forward + backward)" if setup.cuda else
                           "forward passes only (flex_attention has no backward on the CPU)"}

    def mismatch(self) -> dict[str, Any]:
        from looprl.inference.engine import Engine
        from looprl.inference.token_sampling import SamplingParams
        from looprl.inference.weight_update import load_update
        from looprl.trainer import attention
        from looprl.trainer.broadcast import broadcast_weights
        from looprl.trainer.logprobs import token_logprobs
        from looprl.trainer.loss.kl import token_kl
        from looprl.trainer.parallel import Ranks, prepare
        from looprl.trainer.weight_files import full_state_dict

        setup = self.setup
        trainer_model = build_model(setup, seed=0)
        attention.use(trainer_model, setup.training_attention)
        ranks = Ranks(0, 1, setup.device, setup.compute_dtype, distributed=True)  # as trainer.loop in bf16
        trainer_model = prepare(trainer_model, ranks)
        # written in the engine's dtype (inference.dtype: bf16 on a GPU), as the trainer does in a run
        path = broadcast_weights(self.scratch / "mismatch_run", 1, trainer_model, full_state_dict(trainer_model, ranks),
                                 keep=1, dtype=torch.bfloat16)
        engine_model = build_model(setup, seed=1).to(setup.device, torch.bfloat16).eval()  # other weights until loaded
        engine_model.set_attn_implementation("sdpa")
        engine_model.config.use_cache = True
        engine_model.generation_config.eos_token_id = None
        prompt = [random.Random(2).randrange(1, setup.vocab) for _ in range(64)]

        async def sample() -> Any:
            engine = Engine(engine_model, word_tokenizer(), max_batch_size=1)
            engine.start()
            try:
                await engine.update_weights(load_update(path, engine_model, version=1))
                (completion,) = await engine.generate(prompt, SamplingParams(temperature=1.0, max_tokens=128, seed=0))
                return completion
            finally:
                engine.stop()

        completion = asyncio.run(sample())
        ids = torch.tensor(prompt + completion.token_ids, device=setup.device)
        mask = torch.arange(len(ids), device=setup.device) >= len(prompt)
        with torch.no_grad():
            trainer, _ = token_logprobs(trainer_model, ids, torch.arange(len(ids), device=setup.device), mask)
        inference = torch.tensor(completion.logprobs, device=setup.device)
        kl = token_kl(inference, trainer[mask].float())
        return {"ok": bool(torch.isfinite(kl).all()), "mismatch_kl": float(kl.mean()),
                "max_abs_logprob_diff": float((inference - trainer[mask]).abs().max()),
                "tokens": len(completion.token_ids), "engine_dtype": str(engine_model.dtype),
                "trainer_compute": str(setup.compute_dtype), "model": setup.model_path or "random"}

    def block_mask(self) -> dict[str, Any]:
        from looprl.handoff import Tree
        from looprl.trainer.logprobs import tree_block_mask

        def row(tokens: int) -> list[Tree]:  # a prompt with two branches, then a lone sequence
            eighth = tokens // 8
            return [Tree(prefix=eighth, branches=[eighth, 2 * eighth]), Tree(prefix=tokens - 4 * eighth)]

        start = time.perf_counter()
        tree_block_mask(row(1024), self.setup.device)  # compiles (once, dynamic shapes)
        compile_s = time.perf_counter() - start
        timings = []
        for _ in range(3):
            start = time.perf_counter()
            mask = tree_block_mask(row(self.setup.block_mask_tokens), self.setup.device)
            if self.setup.cuda:
                torch.cuda.synchronize()
            timings.append(time.perf_counter() - start)
        tokens = self.setup.block_mask_tokens
        return {"ok": tuple(mask.shape[-2:]) == (tokens, tokens), "tokens": tokens, "compile_s": compile_s,
                "build_s": min(timings), "dense_bool_mask_gib": tokens**2 / 2**30,
                "sparsity": float(mask.sparsity())}

    def tokens_per_s(self) -> dict[str, Any]:
        from looprl.trainer import attention, parallel
        from looprl.trainer.loss import clipped
        from looprl.trainer.optim import build_optimizer, build_scheduler
        from looprl.trainer.step import train_step

        setup = self.setup
        ranks = parallel.Ranks(0, 1, setup.device, setup.compute_dtype, distributed=True)  # as trainer.loop in bf16
        model = build_model(setup)
        attention.use(model, setup.training_attention)
        model = parallel.prepare(model, ranks)
        optimizer = build_optimizer(model, lr=1e-6)
        scheduler = build_scheduler(optimizer)
        rows, steps = packed_rows(setup, 2), 3
        train_step(model, optimizer, scheduler, rows, clipped.token_loss, ranks=ranks)  # warm-up: kernels, allocator
        _sync(setup)
        start = time.perf_counter()
        for _ in range(steps):
            train_step(model, optimizer, scheduler, rows, clipped.token_loss, ranks=ranks)
        _sync(setup)
        elapsed = time.perf_counter() - start
        trainer = len(rows) * setup.row_tokens * steps / elapsed
        del model, optimizer, scheduler
        if setup.cuda:
            torch.cuda.empty_cache()  # the engine's memory cap counts what the trainer's allocator still holds
        engine = engine_tokens_per_s(setup, sequences=64 if setup.cuda else 4, max_tokens=256 if setup.cuda else 16)
        return {"ok": trainer > 0, "trainer_tokens_per_s": trainer, "trainer_step_s": elapsed / steps,
                "row_tokens": setup.row_tokens, "rows_per_step": len(rows),
                "prime_rl_reference_tokens_per_s": PRIME_RL_TOKENS_PER_S, **engine}


_CHILDREN: set[int] = set()
"""Process groups of the subprocess stages still running: `stop_children` ends them when this script is."""


def run_child(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """`command` in a process group of its own; past `timeout_s` the whole group (`looprl rl`'s engine, env
    server and trainer, torchrun's ranks) gets SIGTERM, then SIGKILL, so no orphan keeps the GPU's memory for
    the stages after it. The result's return code is then -SIGTERM or -SIGKILL."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    _CHILDREN.add(child.pid)
    try:
        out, _ = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGTERM)
        try:
            out, _ = child.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, _ = child.communicate()
        with contextlib.suppress(ProcessLookupError):  # the leader left on SIGTERM; a member may not have
            os.killpg(child.pid, signal.SIGKILL)
        out += f"\n[gpu_check: stopped after {timeout_s:.0f} s]"
    finally:
        _CHILDREN.discard(child.pid)
    return subprocess.CompletedProcess(command, child.returncode, out, "")


def stop_children(signum: int, _frame: Any) -> None:
    """SIGTERM (`gpu_check.sh`'s overall `timeout`): the subprocess stages' groups, which that signal does not
    reach, go too."""
    for pid in list(_CHILDREN):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    raise SystemExit(128 + signum)


def fsdp_worker(setup: Setup, out: Path) -> None:
    """One torchrun rank of `fsdp_tokens_per_s`: the model `fully_shard`ed over every rank (one rank on a
    one-GPU machine, as a one-process bf16 trainer is), a warm-up step, then three timed ones."""
    from looprl.trainer import attention, parallel
    from looprl.trainer.loss import clipped
    from looprl.trainer.optim import build_optimizer, build_scheduler
    from looprl.trainer.step import train_step

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if setup.cuda:
        setup = replace(setup, device=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
        torch.cuda.set_device(setup.device)
    dist.init_process_group("nccl" if setup.cuda else "gloo", device_id=setup.device if setup.cuda else None)
    try:
        ranks = parallel.Ranks(rank, world, setup.device, setup.compute_dtype, distributed=True)
        model = build_model(setup)
        attention.use(model, setup.training_attention)
        model = parallel.prepare(model, ranks)
        optimizer = build_optimizer(model, lr=1e-6)
        scheduler = build_scheduler(optimizer)
        rows, steps = packed_rows(setup, 2 * world), 3
        train_step(model, optimizer, scheduler, rows, clipped.token_loss, ranks=ranks)  # warm-up: kernels, allocator
        _sync(setup)
        dist.barrier()
        start = time.perf_counter()
        norms = [train_step(model, optimizer, scheduler, rows, clipped.token_loss, ranks=ranks)["grad_norm"]
                 for _ in range(steps)]
        _sync(setup)
        dist.barrier()
        elapsed = time.perf_counter() - start
        if rank == 0:
            tokens_per_s = len(rows) * setup.row_tokens * steps / elapsed
            out.write_text(json.dumps({
                "ok": tokens_per_s > 0 and all(map(math.isfinite, norms)), "world_size": world,
                "backend": dist.get_backend(), "trainer_tokens_per_s": tokens_per_s,
                "tokens_per_s_per_rank": tokens_per_s / world, "trainer_step_s": elapsed / steps,
                "rows_per_step": len(rows), "row_tokens": setup.row_tokens, "grad_norms": norms,
                "all_dtensors": all(type(p).__name__ == "DTensor" for p in model.parameters()),
                "prime_rl_reference_tokens_per_s": PRIME_RL_TOKENS_PER_S}))
    finally:
        dist.destroy_process_group()


def engine_tokens_per_s(setup: Setup, sequences: int, max_tokens: int, memory_fraction: float = 0.4) -> dict[str, Any]:
    """The embedded engine's batched generation, in process (no HTTP), bf16, capped as when it shares a GPU."""
    from looprl.device import limit_memory
    from looprl.inference.engine import Engine
    from looprl.inference.token_sampling import SamplingParams

    model = build_model(setup).to(setup.device, torch.bfloat16).eval()
    model.set_attn_implementation("sdpa")
    model.config.use_cache = True
    model.generation_config.eos_token_id = None

    async def generate() -> int:
        engine = Engine(model, word_tokenizer(), max_batch_size=sequences)
        engine.start()
        try:
            params = SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=0)
            prompts = [[random.randrange(1, setup.vocab) for _ in range(128)] for _ in range(sequences)]
            done = await asyncio.gather(*(engine.generate(p, params, n=1) for p in prompts))
            return sum(len(c.token_ids) for group in done for c in group)
        finally:
            engine.stop()

    limit_memory(setup.device, memory_fraction)
    start = time.perf_counter()
    try:
        tokens = asyncio.run(generate())
    finally:
        if setup.cuda:
            torch.cuda.set_per_process_memory_fraction(1.0)
    return {"engine_tokens_per_s": tokens / (time.perf_counter() - start), "engine_memory_fraction": memory_fraction}


def _sync(setup: Setup) -> None:
    if setup.cuda:
        torch.cuda.synchronize()


def _generator_states(setup: Setup) -> list[torch.Tensor]:
    return [torch.get_rng_state(), *([torch.cuda.get_rng_state(setup.device)] if setup.cuda else [])]


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Every tensor of AdamW's state, local shards (one rank holds all of each), keyed by position and name."""
    out = {}
    for i, state in enumerate(optimizer.state.values()):
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                out[f"{i}.{name}"] = value.to_local() if hasattr(value, "to_local") else value
    return out


def run(setup: Setup, stages: list[str], out: Path) -> dict[str, Any]:
    """Every stage in turn; the report is rewritten to `out` after each, so a timeout keeps the finished ones."""
    device = torch.cuda.get_device_name() if setup.cuda else "cpu"
    report: dict[str, Any] = {"torch": torch.__version__, "device": device, "smoke": not setup.cuda, "errors": {}}
    memory = PeakMemory(setup)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as scratch:
        dist.init_process_group("nccl" if setup.cuda else "gloo", store=dist.FileStore(f"{scratch}/store", 1), rank=0,
                                world_size=1, device_id=setup.device if setup.cuda else None)
        checks = Checks(setup, Path(scratch))
        try:
            for stage in stages:
                start = time.perf_counter()
                try:
                    report[stage] = memory.measure(stage, getattr(checks, stage))
                except Exception:  # one failing stage must not hide the others
                    report[stage] = {"ok": False}
                    report["errors"][stage] = traceback.format_exc(limit=8)
                report[stage]["seconds"] = time.perf_counter() - start
                report["peak_mem"] = memory.report()
                out.write_text(json.dumps(report, indent=2) + "\n")
                if stage == "checkpoint":
                    checks.sharded = None  # frees the fsdp stage's model
                if setup.cuda:
                    torch.cuda.empty_cache()
        finally:
            dist.destroy_process_group()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--smoke", action="store_true", help="every stage on the CPU with a tiny random model")
    parser.add_argument("--model", help="a local HF model directory (or looprl model alias) instead of random weights")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    parser.add_argument("--fsdp-worker", type=Path, help=argparse.SUPPRESS)  # a torchrun rank of fsdp_tokens_per_s
    args = parser.parse_args()
    if args.fsdp_worker:
        fsdp_worker(smoke_setup() if args.smoke else gpu_setup(None), args.fsdp_worker)
        return 0
    stages = args.stages.split(",")
    unknown = set(stages) - set(STAGES)
    if unknown:
        parser.error(f"unknown stages {sorted(unknown)}")
    signal.signal(signal.SIGTERM, stop_children)
    if not args.smoke and not torch.cuda.is_available():
        print("no CUDA device (use --smoke for the CPU run)", file=sys.stderr)
        return 2
    setup = smoke_setup() if args.smoke else gpu_setup(args.model)
    report = run(setup, stages, Path(args.out))
    print(json.dumps(report, indent=2))
    return 1 if report["errors"] or not all(report[s].get("ok") for s in stages) else 0


if __name__ == "__main__":
    sys.exit(main())
