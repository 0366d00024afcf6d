"""`looprl eval ENV ...`: rollouts of an environment against any model, recorded to a run directory.

Without `--base-url` it starts the embedded inference engine on `--model` (default: the bundled
SmolLM2-135M-Instruct) for the duration of the command. Everything cheap is checked first, each
mistake one line on stderr and exit 2: the flags' ranges, `--env-args` and `--reward-weights`, the
output directory, the env import and the dataset's first rows; only then does the engine start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
from pathlib import Path

from looprl.commands.endpoint import add_api_key_arguments
from looprl.config.trackers import TRACKER_NAMES
from looprl.errors import UserError

RANGES: dict[str, tuple[str, float, bool]] = {
    # attribute: (flag as shown, lower bound, bound included)
    "num_examples": ("-n/--num-examples", 1, True),
    "rollouts_per_example": ("-r/--rollouts-per-example", 1, True),
    "concurrency": ("--concurrency", 1, True),
    "env_workers": ("--env-workers", 1, True),
    "temperature": ("--temperature", 0, True),
    "top_p": ("--top-p", 0, False),
    "max_tokens": ("--max-tokens", 1, True),
    "context_budget": ("--context-budget", 1, True),
    "timeout": ("--timeout", 0, False),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV", help="environment: path/to/file.py:Class or package.module:Class")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (…/v1); default: start the embedded engine")
    p.add_argument("--model", help="model name (with --base-url) or model to serve (default: smollm2-135m-instruct)")
    p.add_argument("--backend", choices=["embedded", "vllm"], default="embedded",
                   help="engine started without --base-url")
    p.add_argument("--vllm-python", help="interpreter that runs vLLM (default: see inference.vllm_python)")
    add_api_key_arguments(p)
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
    p.add_argument("--reward-weights",
                   help="JSON object: weight of each reward component in the total (others weigh 1)")
    p.add_argument("--base-dir", type=Path,
                   help="dataset folder passed to create_dataset (default: data/ beside the env file)")
    p.add_argument("--env-args", help="JSON object of keyword arguments for the env constructor")
    p.add_argument("--log-level", default="INFO", help="level of env log records captured per rollout")
    p.add_argument("--output", "-o", type=Path, required=True, help="run directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output")
    p.add_argument("--tracker", action="append", default=[], choices=TRACKER_NAMES,
                   help="also log the config and results to this experiment tracker, in its local/offline mode "
                        "(repeatable; the defaults of [log.trackers.NAME])")


def check_ranges(args: argparse.Namespace) -> None:
    for attr, (flag, low, inclusive) in RANGES.items():
        value = getattr(args, attr)
        if value is None:
            continue
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            raise UserError(f"{flag} must be {'at least' if inclusive else 'greater than'} {low}")
    if args.top_p is not None and args.top_p > 1:
        raise UserError("--top-p must be at most 1")


def parse_reward_weights(text: str | None) -> dict[str, float]:
    """`--reward-weights` JSON: an object of component name -> number."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(dict[str, float]).validate_json(text) if text else {}
    except ValidationError:
        raise UserError('--reward-weights must be a JSON object of numbers, e.g. {"correct": 2, "format": 0.5}'
                        ) from None


def run(args: argparse.Namespace) -> int:
    from looprl.commands.endpoint import api_key, model_endpoint
    from looprl.commands.eval.progress import RolloutProgress
    from looprl.commands.eval.run import EvalRunConfig, prepare_output, run_eval, track_eval
    from looprl.commands.eval.summary import print_summary
    from looprl.config import EnvRuntimeConfig, SamplingParams, TrackersConfig
    from looprl.envserver.loading import parse_env_args
    from looprl.session.preflight import check_env

    check_ranges(args)
    key = api_key(args)
    env_args = parse_env_args(args.env_args)
    reward_weights = parse_reward_weights(args.reward_weights)
    if args.output.exists() and not args.output.is_dir():
        raise UserError(f"--output {args.output} is a file, not a directory")
    prepare_output(args.output, args.overwrite)
    examples, declared_weights = check_env(args.env, env_args, args.split, args.base_dir, args.num_examples)
    reward_weights = {**declared_weights, **reward_weights}
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens,
                              seed=args.seed)
    with contextlib.ExitStack() as stack:
        base_url, model = model_endpoint(stack, args.base_url, args.model, args.output / "logs" / "inference.log",
                                         args.backend, args.vllm_python)
        runtime = EnvRuntimeConfig(source=args.env, args=env_args, base_dir=args.base_dir, workers=args.env_workers,
                                   level=args.log_level)
        cfg = EvalRunConfig(
            env=runtime, split=args.split, num_examples=args.num_examples,
            rollouts_per_example=args.rollouts_per_example, concurrency=args.concurrency, model=model,
            base_url=base_url, api_key=key, sampling=sampling,
            context_budget=args.context_budget, timeout_s=args.timeout, reward_weights=reward_weights,
            output=args.output, overwrite=args.overwrite,
        )
        with RolloutProgress(len(examples) * args.rollouts_per_example) as progress:
            summary = asyncio.run(run_eval(cfg, lambda records: progress.advance(r.reward for r in records)))
    print_summary(summary)
    if args.tracker:
        track_eval(TrackersConfig.named(args.tracker), cfg, summary)
    print(f"run written to {args.output} — look at it with: looprl rollouts {args.output} · "
          f"looprl logs {args.output} · looprl inspect {args.output}")
    return 0
