"""`looprl validate ENV`: load a small slice of both splits, run one 2-rollout group, report problems.

Exit status 0 when the environment honours the contract, 1 when it does not (each problem printed),
2 for user errors (bad ENV spec, bad JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV", help="environment: path/to/file.py:Class or package.module:Class")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (…/v1); default: start the embedded engine")
    p.add_argument("--model", help="model name (with --base-url) or model to serve")
    p.add_argument("--base-dir", type=Path, help="dataset folder (default: data/ beside the env file)")
    p.add_argument("--env-args", help="JSON object of keyword arguments for the env constructor")
    p.add_argument("--max-examples", type=int, default=4, help="examples loaded per split")
    p.add_argument("--max-tokens", type=int, default=128)


async def _validate(args: argparse.Namespace, base_url: str, model: str) -> list[str]:
    from looprl.config import SamplingParams
    from looprl.envs.base_env import BaseEnv
    from looprl.envserver.loading import default_base_dir, instantiate, load_env_class, parse_env_args
    from looprl.envserver.thread_host import ThreadEnvHost
    from looprl.errors import UserError
    from looprl.gateway.app import Gateway
    from looprl.orchestrator.contract_checks import result_problems, tool_problems
    from looprl.orchestrator.groups import rollout_group

    cls = load_env_class(args.env)
    problems = list(cls.contract_problems()) if issubclass(cls, BaseEnv) else []
    if problems:
        return problems
    env_args = parse_env_args(args.env_args)
    base_dir = args.base_dir or default_base_dir(args.env)
    host = ThreadEnvHost(lambda: instantiate(cls, env_args))
    await host.start()
    try:
        first = None
        for split in ("train", "eval"):
            try:
                dataset = await host.create_dataset(split, base_dir, args.max_examples)
            except UserError as e:
                problems.append(f"create_dataset({split!r}): {e}")
                continue
            except Exception as e:
                problems.append(f"create_dataset({split!r}) raised {type(e).__name__}: {e}")
                continue
            if len(dataset) == 0:
                problems.append(f"create_dataset({split!r}) returned no examples (base_dir={base_dir})")
            elif len(dataset) > args.max_examples:
                problems.append(f"create_dataset({split!r}) ignored max_examples={args.max_examples} "
                                f"(returned {len(dataset)})")
            first = first or (dataset[0] if len(dataset) else None)
        if issubclass(cls, BaseEnv):
            problems += tool_problems(await host.call(lambda env: env.list_tools()))
        if first is None:
            return problems
        gateway = Gateway(base_url, model, SamplingParams(max_tokens=args.max_tokens))
        async with gateway.serve() as url:
            pairs = await rollout_group(host, gateway, url, first, "train", 2, model, timeout_s=600)
        problems += result_problems([r for r, _ in pairs])
        for r, calls in pairs:
            print(f"  rollout {r.rollout_id}: {r.termination_reason}, rewards {r.rewards}, "
                  f"{r.turns} turns, {len(calls)} model calls, {len(r.logs)} log records")
    finally:
        await host.aclose()
    return problems


def run(args: argparse.Namespace) -> int:
    import os
    import tempfile

    from looprl.orchestrator.endpoint import model_endpoint

    log = Path(tempfile.gettempdir()) / f"looprl-validate-{os.getpid()}" / "inference.log"  # created only if used
    with contextlib.ExitStack() as stack:
        base_url, model = model_endpoint(stack, args.base_url, args.model, log)
        problems = asyncio.run(_validate(args, base_url, model))
    if problems:
        print(f"{args.env}: {len(problems)} contract problem(s):")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"{args.env}: OK")
    return 0
