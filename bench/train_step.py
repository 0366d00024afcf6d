"""Trainer throughput: looprl's train step against TRL's `GRPOTrainer` training step, side by side.

Both train the same model (two copies of the same weights) on the same synthetic GRPO batch
(`--samples` sequences in groups of `--group-size`, random prompt and completion lengths, group
advantages), on-policy, with the same loss (token-level clipped ratio normalised over the batch's
tokens: TRL's `loss_type="dapo"`, looprl's defaults), entropy computed, grad clipping and the same
fused AdamW, and neither recomputes activations (TRL's default gradient checkpointing is turned
off: it would cost TRL about a third more compute). A settings row lists what differs between the two sides.
One step is forward + backward + optimizer step over the whole batch. TRL pads every sequence to
the batch's longest prompt and completion; looprl packs them into rows of `--token-budget` tokens,
computing each group's shared prompt once.
The two alternate step by step, so load from other processes hits both alike. Throughput counts
real tokens (prompt + completion, no padding) per second.

`looprl+logprobs` is looprl's step as the trainer runs it: also collecting every loss token's
logprob per rollout and serialising them into the step's report (`TrainerReport`); set beside plain
`looprl`, it is the cost of the inspector's trainer logprobs.

    .venv/bin/python bench/train_step.py [--model smollm2-135m-instruct] [--samples 16] [--steps 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from typing import Any

import torch

from looprl.config import OrchestratorConfig
from looprl.handoff import TrainerReport
from looprl.model_loading import DEFAULT_MODEL
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.session.advantages import group_advantages
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.loss import clipped
from looprl.trainer.model import load_policy
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.parallel import Ranks
from looprl.trainer.rollout_logprobs import RolloutLogprobs
from looprl.trainer.step import train_step

LR = 1e-6


def synthetic_batch(model: Any, args: argparse.Namespace) -> list[TrainingSample]:
    """Random prompts and completions with group advantages and the model's own (on-policy) logprobs."""
    rng = random.Random(0)
    vocab = model.config.vocab_size
    samples = []
    for _ in range(args.samples // args.group_size):
        rewards = [float(rng.random() < 0.5) for _ in range(args.group_size)]
        rewards[0] = 1.0 - rewards[1]  # every group has signal
        advantages = group_advantages(rewards, OrchestratorConfig.model_fields["normalize_std"].default).advantages
        prompt = [rng.randrange(10, vocab) for _ in range(rng.randint(*args.prompt_len))]
        for advantage in advantages:
            completion = [rng.randrange(10, vocab) for _ in range(rng.randint(*args.completion_len))]
            ids = prompt + completion
            mask = [False] * len(prompt) + [True] * len(completion)
            with torch.no_grad():
                logprobs, _ = token_logprobs(model, torch.tensor(ids), torch.arange(len(ids)), torch.tensor(mask))
            samples.append(TrainingSample(rollout_id=f"r{len(samples)}", token_ids=ids, loss_mask=mask,
                                          advantage=advantage or 0.0, inference_logprobs=logprobs.tolist()))
    return samples


def looprl_step_with_logprobs(model: Any, optimizer: Any, scheduler: Any, micro_batches: list[Any]) -> None:
    """The trainer loop's step: the train step collecting per-rollout logprobs, then its report as JSON."""
    collected = RolloutLogprobs()
    metrics = train_step(model, optimizer, scheduler, micro_batches, clipped.token_loss, rollout_logprobs=collected)
    reported = collected.gather(Ranks())
    assert reported is not None
    TrainerReport(step=1, metrics=metrics, rollout_logprobs=reported).model_dump_json()


def trl_inputs(samples: list[TrainingSample], pad_id: int) -> dict[str, torch.Tensor]:
    """The batch as GRPOTrainer's `_generate_and_score_completions` hands it to the loss."""
    prompts = [s.token_ids[: s.loss_mask.index(True)] for s in samples]
    completions = [s.token_ids[s.loss_mask.index(True):] for s in samples]
    p_len, c_len = max(map(len, prompts)), max(map(len, completions))
    prompt_ids = torch.tensor([[pad_id] * (p_len - len(p)) + p for p in prompts])  # left-padded
    prompt_mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prompts])
    completion_ids = torch.tensor([c + [pad_id] * (c_len - len(c)) for c in completions])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (c_len - len(c)) for c in completions])
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": torch.tensor([s.advantage for s in samples]),
            "num_items_in_batch": completion_mask.sum()}


def trl_trainer(model: Any, tokenizer: Any, args: argparse.Namespace, out_dir: str) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=args.samples, num_generations=args.group_size,
        gradient_accumulation_steps=1, max_completion_length=args.completion_len[1], loss_type="dapo", beta=0.0,
        learning_rate=LR, max_grad_norm=1.0, optim="adamw_torch_fused", use_cpu=True, report_to=[], save_strategy="no",
        bf16=False, activation_checkpointing=False,  # TRL's default is on: recomputing activations is extra work
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=config,
                          train_dataset=Dataset.from_list([{"prompt": "hi"}] * args.samples),
                          processing_class=tokenizer)
    trainer.create_optimizer_and_scheduler(num_training_steps=1000)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer


def settings(model: Any, trainer: Any, args: argparse.Namespace,
             micro_batches: list[Any]) -> list[tuple[str, str, str]]:
    """(setting, looprl, TRL) for what the two timed steps run with, TRL's read back from its trainer and model."""
    config = trainer.args
    return [
        ("activation checkpointing", str(model.is_gradient_checkpointing),
         str(trainer.model.is_gradient_checkpointing)),
        ("batch layout", f"{len(micro_batches)} packed rows of <= {args.token_budget} tokens, shared prompts once",
         "one left-padded batch, every prompt per sample"),
        ("loss", "clipped ratio, normalised over the batch's tokens",
         {"dapo": "clipped ratio, normalised over the batch's tokens"}.get(config.loss_type, config.loss_type)),
        ("KL coefficient", "0.0", str(config.beta)),
        ("learning rate", f"{LR:g}", f"{config.learning_rate:g}"),
        ("max grad norm", "1.0", str(config.max_grad_norm)),
        ("optimizer / weight decay / betas", "adamw_torch_fused / 0.0 / (0.9, 0.999)",
         f"{config.optim.value} / {config.weight_decay} / {(config.adam_beta1, config.adam_beta2)}"),
        ("dtype", "float32", "bfloat16" if config.bf16 else "float32"),
        ("CPU threads", str(torch.get_num_threads()), str(torch.get_num_threads())),
    ]


def print_settings(rows: list[tuple[str, str, str]]) -> None:
    differ = [row for row in rows if row[1] != row[2]]
    print("settings in which the two sides differ (setting: looprl | TRL):")
    for name, ours, theirs in differ:
        print(f"  {name}: {ours} | {theirs}")
    print("the same in both: " + ", ".join(name for name, ours, theirs in rows if ours == theirs))


def trl_step(trainer: Any, inputs: dict[str, torch.Tensor]) -> None:
    """What the HF Trainer loop does for one optimizer step, generation left out (inputs prepared)."""
    trainer._prepare_inputs = lambda _: inputs
    trainer.training_step(trainer.model, {}, inputs["num_items_in_batch"])
    torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 1.0)
    trainer.optimizer.step()
    trainer.lr_scheduler.step()
    trainer.optimizer.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, nargs=2, default=(32, 96))
    parser.add_argument("--completion-len", type=int, nargs=2, default=(16, 128))
    parser.add_argument("--token-budget", type=int, default=OrchestratorConfig.model_fields["token_budget"].default,
                        help="looprl's packed row length (default: orchestrator.token_budget's default)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps each (after one warm-up step)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    looprl_model, tokenizer = load_policy(args.model)
    trl_model, _ = load_policy(args.model)
    samples = synthetic_batch(looprl_model, args)
    micro_batches = pack(samples, args.token_budget)
    inputs = trl_inputs(samples, tokenizer.pad_token_id or 0)
    tokens = sum(len(s.token_ids) for s in samples)
    padded = inputs["prompt_ids"].numel() + inputs["completion_ids"].numel()
    print(f"model {args.model}: {len(samples)} samples, {tokens} tokens ({sum(s.loss_tokens for s in samples)} "
          f"completion), looprl {len(micro_batches)} packed rows of {sum(len(mb.token_ids) for mb in micro_batches)} "
          f"tokens (shared prompts once), TRL {padded} padded tokens")

    optimizer = build_optimizer(looprl_model, lr=LR)
    scheduler = build_scheduler(optimizer)
    with tempfile.TemporaryDirectory() as out_dir:
        trainer = trl_trainer(trl_model, tokenizer, args, out_dir)
        runs: dict[str, Any] = {
            "looprl": lambda: train_step(looprl_model, optimizer, scheduler, micro_batches, clipped.token_loss),
            "looprl+logprobs": lambda: looprl_step_with_logprobs(looprl_model, optimizer, scheduler, micro_batches),
            "trl": lambda: trl_step(trainer, inputs),
        }
        print_settings(settings(looprl_model, trainer, args, micro_batches))
        times: dict[str, list[float]] = {name: [] for name in runs}
        for step in range(args.steps + 1):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                if step:  # the first step warms up allocators and kernels
                    times[name].append(time.perf_counter() - start)
    for name, ts in times.items():
        median = statistics.median(ts)
        print(f"{name:>15}: {median:6.2f} s/step (median of {len(ts)}), {tokens / median:7.0f} tokens/s")
    ratio = statistics.median(times["trl"]) / statistics.median(times["looprl"])
    print(f"looprl / TRL training throughput: {ratio:.2f}x (target >= 1.5x)")
    cost = statistics.median(times["looprl+logprobs"]) / statistics.median(times["looprl"]) - 1
    print(f"per-rollout trainer logprobs (collected and serialised): {100 * cost:+.1f}% step time")


if __name__ == "__main__":
    main()
