"""Run groups of an environment through the real runtime (thread host + gateway) against a scripted server."""

from __future__ import annotations

from tests.support.scripted_server import ScriptedServer
from tests.support.thread_host import ThreadEnvHost

from looprl.config import SamplingParams
from looprl.envs.environment import Environment
from looprl.envs.types import Example, RolloutResult
from looprl.gateway.app import Gateway
from looprl.session.groups import rollout_group
from looprl.store.records import ModelCall


def example(prompt: str = "hi", **args) -> Example:
    from looprl.envs.dataset import to_example

    return to_example({"prompt_messages": [{"role": "user", "content": prompt}], **args}, "test")


async def run_groups(env: Environment, server: ScriptedServer, examples: list[Example], group_size: int = 2,
                     timeout_s: float | None = None, context_budget: int | None = None,
                     sampling: SamplingParams | None = None) -> list[list[tuple[RolloutResult, list[ModelCall]]]]:
    import asyncio

    host = ThreadEnvHost(lambda: env)
    await host.start()
    gateway = Gateway(server.base_url, "scripted", sampling or SamplingParams(), context_budget)
    try:
        async with gateway.serve() as url:
            return list(await asyncio.gather(*(
                rollout_group(host, gateway, url, ex, "train", group_size, "scripted", timeout_s) for ex in examples)))
    finally:
        await host.aclose()
