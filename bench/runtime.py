"""Runtime overhead of per-rollout log capture.

Rollouts/s of a 3-turn tool environment (two tool calls, then an answer) through the real runtime
(env thread host + gateway) against an instant local OpenAI-compatible server, with and without
10 log records per rollout, printed side by side with the ratio. Target: capture costs < 15 %.

    .venv/bin/python bench/runtime.py [--groups 40] [--group-size 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.envs import BaseEnv, Dataset
from looprl.envserver.capture import install_capture

logger = logging.getLogger("bench_env")


class ToolEnv(BaseEnv):
    max_turns = 3

    def __init__(self, log_records: int) -> None:
        self.log_records = log_records

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "step", "parameters": {"type": "object", "properties": {}}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        for i in range(self.log_records // 2):
            logger.info("tool %s call %d for %s", tool_name, i, rollout_id)
        return "ok"

    async def compute_reward(self, rollout):
        return {"done": 1.0}


def reply(body) -> Reply:
    tools = sum(m["role"] == "tool" for m in body["messages"])
    return Reply("<answer>1</answer>") if tools >= 2 else Reply(tool_calls=[("step", {})])


async def measure(server: ScriptedServer, log_records: int, groups: int, group_size: int) -> float:
    examples = [example(f"task {i}") for i in range(groups)]
    start = time.perf_counter()
    results = await run_groups(ToolEnv(log_records), server, examples, group_size=group_size)
    elapsed = time.perf_counter() - start
    rollouts = [r for g in results for r, _ in g]
    assert all(r.termination_reason == "finished" for r in rollouts), {r.error for r in rollouts}
    assert all(len(r.logs) == log_records for r in rollouts)
    return len(rollouts) / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    install_capture("INFO")
    plain, logged = [], []
    with ScriptedServer(reply) as server:
        await measure(server, 0, 4, 2)  # warm-up
        for _ in range(args.repeats):  # interleaved, so drift hits both sides alike
            plain.append(await measure(server, 0, args.groups, args.group_size))
            logged.append(await measure(server, 10, args.groups, args.group_size))
    best_plain, best_logged = max(plain), max(logged)
    n = args.groups * args.group_size
    print(f"{n} rollouts per measurement, 3 turns each, best of {args.repeats}")
    print(f"{'':28}{'rollouts/s':>12}")
    print(f"{'no log records':28}{best_plain:12.1f}")
    print(f"{'10 log records / rollout':28}{best_logged:12.1f}")
    print(f"{'ratio (with / without)':28}{best_logged / best_plain:12.3f}   "
          f"capture overhead {100 * (1 - best_logged / best_plain):.1f} %")


if __name__ == "__main__":
    asyncio.run(main())
