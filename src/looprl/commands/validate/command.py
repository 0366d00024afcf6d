"""`looprl validate ENV`: check an environment against the contract, listing each check with ✓ or ✗.

The cheap checks run in this process, before any model starts: the class imports and is an env
(else exit 2), its hooks and class attributes, a small slice (`--max-examples`) of both splits,
the schemas `list_tools` returns. Then one 2-rollout group of the first train example runs the
real path, through a `RolloutSession` (env servers, gateway) on a temporary run directory that is
removed afterwards. Exit status 0 when the environment honours the contract, 1 when it does not
(each problem printed under its check), 2 for user errors (bad ENV spec, bad JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from looprl.commands.endpoint import add_api_key_arguments
from looprl.errors import UserError
from looprl.utils.terminal import printable

if TYPE_CHECKING:
    from pydantic import SecretStr

    from looprl.envs.environment import Environment
    from looprl.envs.types import Example


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV", help="environment: path/to/file.py:Class or package.module:Class")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (…/v1); default: start the embedded engine")
    p.add_argument("--model", help="model name (with --base-url) or model to serve")
    add_api_key_arguments(p)
    p.add_argument("--base-dir", type=Path, help="dataset folder (default: data/ beside the env file)")
    p.add_argument("--env-args", help="JSON object of keyword arguments for the env constructor")
    p.add_argument("--max-examples", type=int, default=4, help="examples loaded per split")
    p.add_argument("--max-tokens", type=int, default=128)


class Checks:
    """The checks run so far, each printed as it ends: `✓ name` or `✗ name` and its problems."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def report(self, name: str, problems: list[str]) -> bool:
        print(f"  {'✗' if problems else '✓'} {name}", flush=True)
        for p in problems:
            print(f"      - {printable(p)}")  # they quote the env's errors and output
        self.problems += problems
        return not problems


async def local_checks(env: Environment, base_dir: Path, max_examples: int, checks: Checks) -> Example | None:
    """Both dataset splits and the tool schemas, on an env constructed in this process; the first
    train (else eval) example, if any."""
    from looprl.commands.validate.contract_checks import tool_problems
    from looprl.envs.base_env import BaseEnv
    from looprl.session.preflight import first_examples

    first = None
    for split in ("train", "eval"):
        try:
            examples = await first_examples(env, split, base_dir, max_examples)
            problems = [] if len(examples) <= max_examples else [
                f"create_dataset({split!r}) ignored max_examples={max_examples} (returned {len(examples)})"]
            first = first or examples[0]
        except UserError as e:
            problems = [str(e)]
        checks.report(f"create_dataset({split!r}) loads up to {max_examples} examples", problems)
    if isinstance(env, BaseEnv):
        checks.report("list_tools returns valid function schemas", tool_problems(await env.list_tools()))
    return first


async def group_check(args: argparse.Namespace, first: Example, run_dir: Path, base_url: str, model: str,
                      key: SecretStr | None, checks: Checks) -> None:
    """One 2-rollout group through env servers and the gateway, as `rl` and `eval` run them."""
    from looprl.commands.validate.contract_checks import result_problems
    from looprl.config import EnvRuntimeConfig, SamplingParams
    from looprl.gateway.app import Gateway
    from looprl.session import RolloutSession

    gateway = Gateway(base_url, model, SamplingParams(max_tokens=args.max_tokens),
                      api_key=key.get_secret_value() if key else None)
    runtime = EnvRuntimeConfig(source=args.env, args=args.env_args, base_dir=args.base_dir)
    async with RolloutSession(run_dir, kind="validate", env=runtime, gateway=gateway, config={},
                              splits=["train"], timeout_s=600) as session:
        group = await session.roll_out(first, "train", 2)
    for r, calls in group:
        print(printable(f"      rollout {r.rollout_id}: {r.termination_reason}, rewards {r.rewards}, "
                        f"{r.turns} turns, {len(calls)} model calls, {len(r.logs)} log records", lines=False))
    checks.report("one group of 2 rollouts runs and is scored", result_problems([r for r, _ in group]))


def run(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from looprl.commands.endpoint import api_key, model_endpoint
    from looprl.envs.base_env import BaseEnv
    from looprl.envs.runtime_api import contract_problems
    from looprl.envserver.loading import default_base_dir, instantiate, load_env_class, parse_env_args

    for flag, value in (("--max-examples", args.max_examples), ("--max-tokens", args.max_tokens)):
        if value < 1:
            raise UserError(f"{flag} must be at least 1")
    key = api_key(args)
    cls = load_env_class(args.env)
    args.env_args = parse_env_args(args.env_args)
    checks = Checks()
    print(f"validating {args.env}:")
    checks.report("imports and is an environment", [])
    if checks.report("hooks and class attributes", contract_problems(cls) if issubclass(cls, BaseEnv) else []):

        async def local() -> Example | None:
            env = instantiate(cls, args.env_args)
            try:
                return await local_checks(env, args.base_dir or default_base_dir(args.env), args.max_examples, checks)
            finally:
                await env.aclose()

        first = asyncio.run(local())
        if first is not None:
            run_dir = Path(tempfile.mkdtemp(prefix="looprl-validate-"))
            try:
                with contextlib.ExitStack() as stack:
                    base_url, model = model_endpoint(stack, args.base_url, args.model,
                                                     run_dir / "logs" / "inference.log")
                    asyncio.run(group_check(args, first, run_dir, base_url, model, key, checks))
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
    if checks.problems:
        print(f"{args.env}: {len(checks.problems)} contract problem(s)")
        return 1
    print(f"{args.env}: OK")
    return 0
