"""Every env hook x every fault, through real env workers: each cell ends as the README promises.

Hooks: `run_tool`, `rollout_context` enter and exit, `compute_reward`, `compute_group_rewards`.
Faults: raise, blocking hang, async hang, process kill, bad return value. Each cell is a group of
three rollouts whose first (`bad-...`) injects the fault once its siblings are scored (the group
hook's fault hits the whole group), beside a healthy group on the same worker. A cell checks the
termination reason and error, the failure's record in the rollout's logs, the siblings and the
healthy group, and its wall time. Cells that kill a worker (blocking hang, kill) get a worker each.
"""

import asyncio
import textwrap
import time

import pytest

from looprl.envs.types import GroupRequest
from looprl.envserver.host import EnvServerHost
from looprl.session.groups import new_id
from tests.support.harness import example
from tests.support.scripted_server import Reply, ScriptedServer

TIMEOUT_S = 2.0
MARGIN_S = 2.5

ENV = textwrap.dedent('''
    import asyncio, logging, os, signal, time
    from contextlib import asynccontextmanager
    from looprl.envs import BaseEnv, Dataset

    logger = logging.getLogger("faulty_env")
    TOOLS = [{"type": "function", "function": {"name": "act", "parameters": {"type": "object", "properties": {}}}}]

    scored = set()

    async def inject(hook, fault, rollout_id):
        if hook != "compute_group_rewards":
            while len({r for r in scored if r.split("-")[1] == rollout_id.split("-")[1]}) < 2:
                await asyncio.sleep(0.01)
        logger.info("injecting %s into %s", fault, hook)
        if fault == "raise":
            raise RuntimeError(f"injected into {hook}")
        if fault == "block":
            time.sleep(60)
        if fault == "sleep":
            await asyncio.sleep(60)
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

    def cell(rollout_id, example_args, hook):
        if example_args.get("hook") == hook and (rollout_id.startswith("bad-") or hook == "group"):
            return example_args["fault"]
        return None

    class Env(BaseEnv):
        max_turns = 2

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([])

        async def list_tools(self):
            return TOOLS

        async def run_tool(self, rollout_id, tool_name, **args):
            fault = cell(rollout_id, self.args[rollout_id], "run_tool")
            if fault:
                await inject("run_tool", fault, rollout_id)
                if fault == "bad":
                    return object()
            print(f"tool ran for {rollout_id}")
            return {"ok": True}

        def rollout_context(self, rollout_id, example):
            if cell(rollout_id, example.example_args, "enter") == "bad":
                return object()
            return self._context(rollout_id, example)

        @asynccontextmanager
        async def _context(self, rollout_id, example):
            self.args = getattr(self, "args", {})
            self.args[rollout_id] = example.example_args
            fault = cell(rollout_id, example.example_args, "enter")
            if fault:
                await inject("enter", fault, rollout_id)
            yield
            fault = cell(rollout_id, example.example_args, "exit")
            if fault == "bad":
                yield
            elif fault:
                await inject("exit", fault, rollout_id)

        async def compute_reward(self, rollout):
            fault = cell(rollout.rollout_id, rollout.example_args, "compute_reward")
            if fault:
                await inject("compute_reward", fault, rollout.rollout_id)
                if fault == "bad":
                    return {"correct": "yes"}
            scored.add(rollout.rollout_id)
            return {"correct": 1.0}

    class GroupEnv(Env):
        async def compute_group_rewards(self, rollouts):
            fault = cell(rollouts[0].rollout_id, rollouts[0].example_args, "group")
            if fault:
                await inject("compute_group_rewards", fault, "")
                if fault == "bad":
                    return [1.0]
            return {r.rollout_id: {"rank": 1.0} for r in rollouts}
''')

HOOKS = ("run_tool", "enter", "exit", "compute_reward")
RAISED = {"run_tool": ("tool_error", "injected into run_tool"), "enter": ("env_error", "injected into enter"),
          "exit": ("env_error", "injected into exit"), "compute_reward": ("reward_error", "injected into compute_reward"),
          "group": ("group_reward_error", "injected into compute_group_rewards")}
BAD = {"run_tool": ("tool_error", "returned a object, which is neither a str nor JSON-serialisable"),
       "enter": ("env_error", "rollout_context raised on enter"), "exit": ("env_error", "generator didn't stop"),
       "compute_reward": ("reward_error", "components must be numbers"),
       "group": ("group_reward_error", "must return {rollout_id: dict}, got list")}


def expected(hook: str, fault: str) -> tuple[str, str]:
    """(termination reason, text in the error) of the faulty rollout(s) of a cell."""
    if fault == "raise":
        return RAISED[hook]
    if fault == "bad":
        return BAD[hook]
    if fault == "block":
        return "timeout", "in blocking code"
    if fault == "sleep":
        return "timeout", "timeout"
    if hook == "exit":  # killed after it was settled: the rollout keeps its result
        return "finished", ""
    return "env_worker_died", "SIGKILL"


def reply(body) -> Reply:
    done = any(m["role"] == "tool" for m in body["messages"])
    return Reply("done") if done else Reply("", tool_calls=[("act", {})])


def group(server, hook: str, fault: str | None) -> GroupRequest:
    args = {"hook": hook, "fault": fault} if fault else {}
    tag = new_id()
    return GroupRequest(group_id=new_id(), example=example("go", **args), split="train",
                        rollout_ids=[f"bad-{tag}-0", f"ok-{tag}-1", f"ok-{tag}-2"], model="scripted",
                        base_url_template=server.base_url, timeout_s=TIMEOUT_S)


async def timed(host: EnvServerHost, request: GroupRequest):
    start = time.monotonic()
    results = await host.submit_group(request)
    return results, time.monotonic() - start


@pytest.fixture
def env_file(tmp_path):
    path = tmp_path / "faulty_env.py"
    path.write_text(ENV)
    return path


async def test_every_hook_times_every_fault(tmp_path, env_file):
    fatal = [(hook, fault) for fault in ("block", "kill") for hook in HOOKS]
    group_fatal = [("group", "block"), ("group", "kill")]
    safe = [(hook, fault) for fault in ("raise", "sleep", "bad") for hook in HOOKS]
    group_safe = [("group", fault) for fault in ("raise", "sleep", "bad")]
    hosts = [EnvServerHost(f"{env_file}:{cls}", tmp_path / name, splits=["train"], workers=workers, timeout_grace_s=1.0)
             for name, cls, workers in (("fatal", "Env", len(fatal)), ("safe", "Env", 1),
                                        ("group_fatal", "GroupEnv", len(group_fatal)), ("group_safe", "GroupEnv", 1))]
    await asyncio.gather(*(h.start() for h in hosts))
    try:
        with ScriptedServer(reply) as server:
            plan = [(host, cells, [group(server, *c) for c in cells], [group(server, "", None) for _ in range(w)])
                    for host, cells, w in zip(hosts, (fatal, safe, group_fatal, group_safe), (len(fatal), 1, 2, 1))]
            runs = [[timed(host, r) for r in requests + healthy] for host, _, requests, healthy in plan]
            outcomes = await asyncio.gather(*(asyncio.gather(*r) for r in runs))
    finally:
        await asyncio.gather(*(h.aclose() for h in hosts))
    problems = []
    for (host, cells, requests, healthy), results in zip(plan, outcomes):
        for (hook, fault), (rollouts, elapsed) in zip(cells, results):
            problems += check_cell(hook, fault, rollouts, elapsed)
        for rollouts, _ in results[len(cells):]:
            reasons = [r.termination_reason for r in rollouts]
            if reasons != ["finished"] * 3 or not all(r.rewards.get("correct") == 1.0 for r in rollouts):
                problems.append(f"a healthy group beside {cells}: {reasons}")
    assert not problems, "\n".join(problems)


def check_cell(hook: str, fault: str, rollouts, elapsed: float) -> list[str]:
    name = f"{hook} x {fault}"
    reason, text = expected(hook, fault)
    faulty = rollouts if hook == "group" else rollouts[:1]
    siblings = [] if hook == "group" else rollouts[1:]
    problems = []
    if elapsed > TIMEOUT_S + MARGIN_S:
        problems.append(f"{name}: took {elapsed:.1f} s")
    for r in faulty:
        if r.termination_reason != reason or text not in (r.error or ""):
            problems.append(f"{name}: ended {r.termination_reason} ({(r.error or '')[:300]!r}), expected {reason} ({text!r})")
        records = [rec for rec in r.logs if rec.logger == "looprl.failure"]
        if not any(f"injecting {fault} into" in rec.message for rec in r.logs) and fault != "bad" or not records:
            problems.append(f"{name}: logs lack the fault's records: {[(rec.logger, rec.message) for rec in r.logs]}")
        if fault in ("block", "sleep") and not any("inject" in (rec.exception or "") for rec in records):
            problems.append(f"{name}: no stuck stack in the failure record: {[rec.exception for rec in records]}")
    for r in siblings:
        if r.termination_reason != "finished" or r.rewards != {"correct": 1.0} or len(r.messages) != 4:
            problems.append(f"{name}: a sibling ended {r.termination_reason} {r.rewards} ({r.error!r})")
        if hook != "enter" and not any(rec.logger == "stdout" and rec.message.startswith("tool ran") for rec in r.logs):
            problems.append(f"{name}: a sibling's print is not in its logs: {[rec.message for rec in r.logs]}")
    return problems
