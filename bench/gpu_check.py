"""The GPU check (`bench/gpu_check.sh`): trainer and embedded-engine throughput on one GPU, no download.

A Qwen3-0.6B-shaped model (28 layers, hidden 1024, vocabulary 151936) with random weights, built
locally: throughput does not need trained weights. It measures

- `tree_equal_flex`: the flex_attention block-mask path gives the dense-mask logprobs on a
  shared-prompt tree (the unit test's check, on the attention path only CUDA has);
- `trainer_tokens_per_s`: looprl's `train_step` (forward, backward, AdamW) on packed 16k-token rows,
  bf16 compute over fp32 master weights, flex attention; prime-rl's published figure for Qwen3-0.6B,
  16k sequence length, 1xH100 is 11.9k tokens/s;
- `engine_tokens_per_s`: the embedded engine's generation throughput (batched sampling), measured
  in-process through `Engine.generate` (no HTTP server), bf16 weights on the GPU, its allocator capped
  at `--engine-memory-fraction` of the GPU as when it shares the GPU with the trainer
  (`deployment.inference_memory_fraction`); `engine_peak_memory_gib` is what it used.

It imports only torch, transformers, safetensors and looprl's trainer and engine modules (the trainer's
need pydantic and loguru, the engine's loguru; no fastapi or uvicorn: see README "Scaling up" for
carrying them as wheels). One JSON report, printed and written to `--out`.

    PYTHONPATH=src python bench/gpu_check.py --out gpu_check.json [--rows 2 --steps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import traceback
from typing import Any

import torch

ROW_TOKENS = 16384
PROMPT, COMPLETION, SIBLINGS = 512, 1536, 8  # one tree: 512 + 8 x 1536 ~ 12.8k tokens


def build_model(layers: int) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                                  num_hidden_layers=layers, num_attention_heads=16, num_key_value_heads=8,
                                  head_dim=128, max_position_embeddings=40960, tie_word_embeddings=True)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def packed_rows(rows: int) -> list[Any]:
    from looprl.handoff import MicroBatch, Tree

    out, rng = [], random.Random(0)
    for _ in range(rows):
        ids, pos, mask, trees = [], [], [], []
        while len(ids) + PROMPT + SIBLINGS * COMPLETION <= ROW_TOKENS:
            ids += [rng.randrange(151936) for _ in range(PROMPT + SIBLINGS * COMPLETION)]
            pos += list(range(PROMPT)) + [p for _ in range(SIBLINGS) for p in range(PROMPT, PROMPT + COMPLETION)]
            mask += [False] * PROMPT + [True] * (SIBLINGS * COMPLETION)
            trees.append(Tree(prefix=PROMPT, branches=[COMPLETION] * SIBLINGS))
        rest = ROW_TOKENS - len(ids)  # fill the row with one lone sequence
        ids += [rng.randrange(151936) for _ in range(rest)]
        pos += list(range(rest))
        mask += [False] + [True] * (rest - 1)
        trees.append(Tree(prefix=rest))
        out.append(MicroBatch(token_ids=ids, position_ids=pos, loss_mask=mask, inference_logprobs=[-2.0] * len(ids),
                              advantages=[rng.choice([-1.0, 1.0]) for _ in ids], trees=trees,
                              rollout_ids=[f"r{i}" for i in range(len(trees))]))
    return out


def tree_equal_flex(model: Any) -> float:
    """Max |dense - flex| logprob difference on a small tree (bf16 compute)."""
    from looprl.handoff import Tree
    from looprl.trainer.logprobs import token_logprobs

    trees = [Tree(prefix=300, branches=[200, 150, 90]), Tree(prefix=77)]
    n = sum(t.prefix + sum(t.branches) for t in trees)
    ids = torch.randint(0, 151936, (n,), device="cuda")
    pos = torch.cat([torch.arange(300), torch.arange(300, 500), torch.arange(300, 450), torch.arange(300, 390),
                     torch.arange(77)]).cuda()
    results = []
    for impl in ("sdpa", "flex_attention"):
        model.set_attn_implementation(impl)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            results.append(token_logprobs(model, ids, pos, trees=trees)[0].float())
    return float((results[0] - results[1]).abs().max())


def trainer_throughput(model: Any, rows: int, steps: int) -> dict[str, float]:
    from looprl.trainer.loss import clipped
    from looprl.trainer.optim import build_optimizer, build_scheduler
    from looprl.trainer.parallel import Ranks
    from looprl.trainer.step import train_step

    ranks = Ranks(device=torch.device("cuda"), compute_dtype=torch.bfloat16)
    model.set_attn_implementation("flex_attention")
    optimizer = build_optimizer(model, lr=1e-6)
    scheduler = build_scheduler(optimizer)
    batch = packed_rows(rows)
    train_step(model, optimizer, scheduler, batch, clipped.token_loss, ranks=ranks)  # warm-up (kernels, allocator)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        train_step(model, optimizer, scheduler, batch, clipped.token_loss, ranks=ranks)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return {"trainer_tokens_per_s": rows * ROW_TOKENS * steps / elapsed, "trainer_step_s": elapsed / steps,
            "trainer_peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30}


def engine_throughput(model: Any, sequences: int, max_tokens: int, memory_fraction: float) -> dict[str, float]:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from looprl.inference.device import limit_memory
    from looprl.inference.engine import Engine
    from looprl.inference.token_sampling import SamplingParams

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                        eos_token="<unk>")
    engine_model = model.to(torch.bfloat16).eval()
    engine_model.set_attn_implementation("sdpa")
    engine_model.config.use_cache = True
    engine_model.generation_config.eos_token_id = None

    async def generate() -> int:
        engine = Engine(engine_model, tokenizer, max_batch_size=sequences)
        engine.start()
        try:
            params = SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=0)
            prompts = [[random.randrange(1, 151936) for _ in range(128)] for _ in range(sequences)]
            done = await asyncio.gather(*(engine.generate(p, params, n=1) for p in prompts))
            return sum(len(c.token_ids) for group in done for c in group)
        finally:
            engine.stop()

    cuda = engine_model.device.type == "cuda"
    if cuda:
        limit_memory(engine_model.device, memory_fraction)
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        tokens = asyncio.run(generate())
    finally:
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0)
    report = {"engine_tokens_per_s": tokens / (time.perf_counter() - start), "engine_tokens": float(tokens)}
    if cuda:
        report |= {"engine_memory_fraction": memory_fraction,
                   "engine_peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--rows", type=int, default=2, help="16k-token packed rows per optimizer step")
    parser.add_argument("--steps", type=int, default=3, help="timed optimizer steps")
    parser.add_argument("--sequences", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--engine-memory-fraction", type=float, default=0.4,
                        help="the engine's cap on GPU memory (deployment.inference_memory_fraction's default)")
    args = parser.parse_args()
    report: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
                              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                              "reference_prime_rl_tokens_per_s": 11900.0, "errors": {}}
    if not torch.cuda.is_available():
        report["errors"]["cuda"] = "no CUDA device"
    else:
        model = build_model(args.layers).cuda()
        report["params_m"] = sum(p.numel() for p in model.parameters()) / 1e6
        for name, check in (("tree_equal_flex", lambda: {"tree_flex_vs_dense_max_abs": tree_equal_flex(model)}),
                            ("trainer", lambda: trainer_throughput(model, args.rows, args.steps)),
                            ("engine", lambda: engine_throughput(model, args.sequences, args.max_tokens,
                                                                 args.engine_memory_fraction))):
            try:
                report.update(check())
            except Exception:  # one failing measure must not hide the others
                report["errors"][name] = traceback.format_exc(limit=6)
            torch.cuda.empty_cache()
    text = json.dumps(report, indent=2)
    print(text)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
