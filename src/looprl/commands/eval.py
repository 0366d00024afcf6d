"""`looprl eval ENV ...`: rollouts of an environment against any model, recorded to a run directory.

Without `--base-url` it starts the embedded inference engine on `--model` (default: the bundled
SmolLM2-135M-Instruct) for the duration of the command.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV", help="environment: path/to/file.py:Class or package.module:Class")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (…/v1); default: start the embedded engine")
    p.add_argument("--model", help="model name (with --base-url) or model to serve (default: smollm2-135m-instruct)")
    p.add_argument("--api-key", help="API key for --base-url (default: $OPENAI_API_KEY when set)")
    p.add_argument("-n", "--num-examples", type=int, default=5, help="examples to evaluate (the first N)")
    p.add_argument("-r", "--rollouts-per-example", type=int, default=3, help="sibling rollouts per example (one group)")
    p.add_argument("--split", choices=["train", "eval"], default="eval")
    p.add_argument("--concurrency", type=int, default=32, help="most rollouts in flight at once")
    p.add_argument("--env-workers", type=int, default=1, help="env worker processes running the env's code")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float)
    p.add_argument("--max-tokens", type=int, default=512, help="most tokens per model call")
    p.add_argument("--seed", type=int)
    p.add_argument("--context-budget", type=int, help="most tokens in a rollout's context (prompt + completion)")
    p.add_argument("--timeout", type=float, help="seconds a rollout may take before it ends as `timeout`")
    p.add_argument("--base-dir", type=Path, help="dataset folder passed to create_dataset (default: data/ beside the env file)")
    p.add_argument("--env-args", help="JSON object of keyword arguments for the env constructor")
    p.add_argument("--log-level", default="INFO", help="level of env log records captured per rollout")
    p.add_argument("--output", "-o", type=Path, required=True, help="run directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output")


def run(args: argparse.Namespace) -> int:
    import os

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from looprl.config import SamplingParams
    from looprl.envserver.loading import load_env_class, parse_env_args
    from looprl.orchestrator.endpoint import model_endpoint
    from looprl.orchestrator.eval_run import EvalConfig, run_eval
    from looprl.orchestrator.summary import print_summary

    load_env_class(args.env)  # fail fast on a bad ENV, before starting an engine
    env_args = parse_env_args(args.env_args)
    with contextlib.ExitStack() as stack:
        base_url, model = model_endpoint(stack, args.base_url, args.model, args.output / "logs" / "inference.log")
        cfg = EvalConfig(
            env=args.env, env_args=env_args, base_dir=args.base_dir, split=args.split,
            num_examples=args.num_examples, rollouts_per_example=args.rollouts_per_example,
            concurrency=args.concurrency, env_workers=args.env_workers, model=model, base_url=base_url,
            api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
            sampling=SamplingParams(temperature=args.temperature, top_p=args.top_p,
                                    max_tokens=args.max_tokens, seed=args.seed),
            context_budget=args.context_budget, timeout_s=args.timeout, output=args.output,
            overwrite=args.overwrite, log_level=args.log_level,
        )
        with Progress(TextColumn("rollouts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
            task = bar.add_task("rollouts", total=None)
            summary = asyncio.run(run_eval(cfg, lambda done, total: bar.update(task, completed=done, total=total)))
    print_summary(summary)
    print(f"run written to {args.output} — look at it with: looprl rollouts {args.output} · "
          f"looprl logs {args.output} · looprl inspect {args.output}")
    return 0
