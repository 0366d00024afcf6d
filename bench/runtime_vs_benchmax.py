"""Env runtime throughput: looprl's `looprl eval` path against benchmax's in-process `run_group`.

The same 3-turn tool environment (two tool calls, then an answer; 5 `logging` records per tool call,
10 per rollout) runs on both sides against the same scripted OpenAI-compatible server
(`tests/support/scripted_server.py`), which answers at once in a process of its own:

- looprl: `run_eval`, what `looprl eval` runs — an env worker process, the gateway in front of the
  server, the session, and the run store with every rollout, model call and log record. After each run
  the bench counts the rollouts and the env's records in `looprl.db` and stops if one is missing.
- benchmax: `benchmax.envs.BaseEnv.run_group` in one process under `--benchmax-python` (a Python 3.12
  venv with benchmax 0.2.5), groups gathered under the same rollout concurrency. benchmax installs no
  capture: its env's records go to a root logger at WARNING and are dropped.

Per side and load it prints the median [min-max] over `--repeats` of the rollouts/s of the rollout
phase (from the env ready and the dataset built to the last group done; looprl's includes writing
every group to the store) and of the whole run (looprl's includes starting its env worker and closing
the store), and the ratios looprl / benchmax of the medians. Sides and loads are interleaved so that
drift on a shared machine hits both alike.

    .venv/bin/python bench/runtime_vs_benchmax.py [--rollouts 320 960] [--group-size 8] [--concurrency 320]
        [--repeats 3] [--benchmax-python .venv312/bin/python]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RECORDS_PER_TOOL_CALL = 5
ENV_LOGGER = "bench_env"

LOOPRL_ENV = textwrap.dedent(f'''
    import logging
    from looprl.envs import BaseEnv, Dataset
    from looprl.envs.dataset import to_example

    logger = logging.getLogger("{ENV_LOGGER}")
    TOOLS = [{{"type": "function",
              "function": {{"name": "step", "parameters": {{"type": "object", "properties": {{}}}}}}}}]

    class ToolEnv(BaseEnv):
        max_turns = 3

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([to_example({{"prompt_messages": [{{"role": "user", "content": f"task {{i}}"}}]}}, split)
                            for i in range(max_examples or 1)])

        async def list_tools(self):
            return TOOLS

        async def run_tool(self, rollout_id, tool_name, **args):
            for i in range({RECORDS_PER_TOOL_CALL}):
                logger.info("tool %s call %d for %s", tool_name, i, rollout_id)
            return "ok"

        async def compute_reward(self, rollout):
            return {{"done": 1.0}}
''')


def reply(body: dict[str, Any]) -> Any:
    """Two tool calls, then an answer."""
    from tests.support.scripted_server import Reply

    tools = sum(m["role"] == "tool" for m in body["messages"])
    return Reply("<answer>1</answer>") if tools >= 2 else Reply(tool_calls=[("step", {})])


def serve() -> None:
    """The scripted server, in a process of its own: prints its base URL, serves until stdin closes."""
    from tests.support.scripted_server import ScriptedServer

    with ScriptedServer(reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


# benchmax side (runs under --benchmax-python) ------------------------------------------------------

async def benchmax_side(base_url: str, loads: list[int], group_size: int, concurrency: int) -> None:
    import logging

    from benchmax.envs import BaseEnv, Dataset, Example, RolloutRequest, StaticBearerAuth, canonical_example_id

    logger = logging.getLogger(ENV_LOGGER)
    tools = [{"type": "function", "function": {"name": "step", "parameters": {"type": "object", "properties": {}}}}]

    class ToolEnv(BaseEnv):
        max_turns = 3

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            rows = [{"prompt_messages": [{"role": "user", "content": f"task {i}"}]} for i in range(max_examples or 1)]
            return Dataset([Example(id=canonical_example_id(row), payload=row) for row in rows])

        async def list_tools(self):
            return tools

        async def run_tool(self, rollout_id, tool_name, **args):
            for i in range(RECORDS_PER_TOOL_CALL):
                logger.info("tool %s call %d for %s", tool_name, i, rollout_id)
            return "ok"

        async def compute_reward(self, rollout):
            return {"done": 1.0}

    auth = StaticBearerAuth("bench")

    async def measure(rollouts: int) -> dict[str, Any]:
        start = time.perf_counter()
        env = ToolEnv()
        examples = list(await env.create_dataset("eval", Path("."), max_examples=rollouts // group_size))
        ready = time.perf_counter()
        slots = asyncio.Semaphore(concurrency // group_size)

        async def group(gi: int, example: Any) -> Any:
            async with slots:
                return await env.run_group([RolloutRequest(rollout_id=f"{gi}-{k}", example=example, model="scripted",
                                                           base_url=base_url, model_auth=auth, split="eval")
                                            for k in range(group_size)])

        outcomes = [o for g in await asyncio.gather(*(group(i, e) for i, e in enumerate(examples))) for o in g.values()]
        done = time.perf_counter()
        await env.aclose()
        reasons = Counter(o.termination_reason for o in outcomes)
        return {"rollouts": len(outcomes), "reasons": reasons, "phase_s": done - ready, "total_s": done - start}

    await measure(2 * group_size)  # warm-up: imports, the SDK's first request
    for n in loads:
        print(json.dumps(await measure(n)), flush=True)


# looprl side -------------------------------------------------------------------------------------

async def looprl_side(base_url: str, spec: str, out: Path, rollouts: int, group_size: int,
                      concurrency: int) -> dict[str, Any]:
    from looprl.commands.eval.run import EvalRunConfig, run_eval
    from looprl.config import EnvRuntimeConfig
    from looprl.session import RolloutSession

    marks: dict[str, float] = {}
    enter = RolloutSession.__aenter__

    async def timed_enter(self: RolloutSession) -> RolloutSession:  # when the env worker is ready
        session = await enter(self)
        marks["ready"] = time.perf_counter()
        return session

    def on_group(records: list[Any]) -> None:
        marks["done"] = time.perf_counter()

    cfg = EvalRunConfig(env=EnvRuntimeConfig(source=spec, workers=1, level="INFO"), split="eval",
                        num_examples=rollouts // group_size, rollouts_per_example=group_size, concurrency=concurrency,
                        model="scripted", base_url=base_url, output=out)
    RolloutSession.__aenter__ = timed_enter  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        summary = await run_eval(cfg, on_group)
        end = time.perf_counter()
    finally:
        RolloutSession.__aenter__ = enter  # type: ignore[method-assign]
    with sqlite3.connect(out / "looprl.db") as db:
        stored = db.execute("SELECT count(*), sum(termination_reason = 'finished') FROM rollouts").fetchone()
        records = db.execute("SELECT count(*) FROM rollout_logs WHERE logger = ?", (ENV_LOGGER,)).fetchone()[0]
    expected = rollouts // group_size * group_size
    if stored != (expected, expected) or records != expected * 2 * RECORDS_PER_TOOL_CALL:
        raise SystemExit(f"looprl stored {stored} (rollouts, finished) and {records} records; expected {expected} "
                         f"finished rollouts with {2 * RECORDS_PER_TOOL_CALL} records each")
    assert summary["rollouts"] == expected
    return {"rollouts": expected, "finished": stored[1], "records": records, "phase_s": marks["done"] - marks["ready"],
            "total_s": end - start}


# driver ------------------------------------------------------------------------------------------

def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, nargs="+", default=[320, 960])
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=320, help="rollouts in flight at once, on both sides")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--benchmax-python", default=str(ROOT / ".venv312/bin/python"),
                        help="a Python with benchmax installed (the 3.12 venv)")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, __file__, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert server.stdout is not None and server.stdin is not None
    base_url = server.stdout.readline().strip()
    rates: dict[tuple[str, int, str], list[float]] = {}
    records: list[int] = []
    unfinished: Counter[str] = Counter()
    """benchmax's rollouts that did not finish, by reason (counted in its rate all the same)."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env_file = Path(tmp) / "tool_env.py"
            env_file.write_text(LOOPRL_ENV)
            spec = f"{env_file}:ToolEnv"
            asyncio.run(looprl_side(base_url, spec, Path(tmp) / "warm-up", 2 * args.group_size, args.group_size,
                                    args.concurrency))
            for repeat in range(args.repeats):
                for n in args.rollouts:
                    got = asyncio.run(looprl_side(base_url, spec, Path(tmp) / f"run-{repeat}-{n}", n, args.group_size,
                                                  args.concurrency))
                    records.append(got["records"])
                    for what in ("phase", "total"):
                        rates.setdefault(("looprl", n, what), []).append(got["rollouts"] / got[f"{what}_s"])
                side = subprocess.run(
                    [args.benchmax_python, __file__, "benchmax", base_url, str(args.group_size), str(args.concurrency),
                     *map(str, args.rollouts)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
                if side.returncode:
                    raise SystemExit(f"the benchmax side failed:\n{side.stderr}")
                for n, line in zip(args.rollouts, side.stdout.splitlines(), strict=True):
                    got = json.loads(line)
                    unfinished.update({k: v for k, v in got["reasons"].items() if k != "finished"})
                    for what in ("phase", "total"):
                        rates.setdefault(("benchmax", n, what), []).append(got["rollouts"] / got[f"{what}_s"])
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    print(f"3 turns per rollout (2 tool calls, then an answer), {2 * RECORDS_PER_TOOL_CALL} log records per rollout, "
          f"groups of {args.group_size}, {args.concurrency} rollouts in flight; median [min-max] of {args.repeats}")
    print(f"looprl: every rollout finished, every record kept ({sum(records)} in its stores); benchmax keeps none"
          + (f" and did not finish {sum(unfinished.values())} rollouts ({dict(unfinished)}), counted all the same"
             if unfinished else ""))
    print(f"{'rollouts/s':22}{'rollouts':>9}{'looprl':>22}{'benchmax':>22}{'looprl / benchmax':>20}")
    for what, label in (("phase", "rollout phase"), ("total", "whole run")):
        for n in args.rollouts:
            ours, theirs = rates[("looprl", n, what)], rates[("benchmax", n, what)]
            ratio = statistics.median(ours) / statistics.median(theirs)
            print(f"{label:22}{n:9d}{spread(ours):>22}{spread(theirs):>22}{ratio:20.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
    elif sys.argv[1:2] == ["benchmax"]:
        url, size, concurrency, *loads = sys.argv[2:]
        asyncio.run(benchmax_side(url, [int(n) for n in loads], int(size), int(concurrency)))
    else:
        main()
