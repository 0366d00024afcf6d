"""The BaseEnv loop: every termination reason and failure path, each with its siblings unaffected."""

import asyncio
from contextlib import asynccontextmanager

import pytest
from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.envs import BaseEnv, BaseRollout, Dataset, RolloutFailure
from looprl.envs.runtime_api import contract_problems

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]


def last_user(body) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


class Env(BaseEnv):
    """Behaviour keyed on the prompt: 'fail-reward', 'bad-reward', ... ; 'ok' scores 1."""

    max_turns = 2
    max_tool_calls = 2

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def list_tools(self):
        return TOOLS

    async def run_tool(self, rollout_id, tool_name, **args):
        if args.get("a") == "boom":
            raise RuntimeError("tool exploded")
        if args.get("a") == "fail":
            raise RolloutFailure("sandbox_unavailable", "no sandbox")
        if args.get("a") == "opaque":
            return object()
        return args["a"] + args["b"]

    async def compute_reward(self, rollout: BaseRollout):
        kind = rollout.example_args.get("kind")
        if kind == "fail-reward":
            raise ValueError("judge down")
        if kind == "bad-reward":
            return {"x": float("nan")}
        if kind == "str-reward":
            return {"x": "high"}
        return {"correct": 1.0}


def by_prompt(body) -> Reply:
    p = last_user(body)
    tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
    if p == "length":
        return Reply("truncated", finish_reason="length")
    if p == "http500":
        return Reply(status=500)
    if p == "ctx":
        return Reply(status=400, error={"message": "This model's maximum context length is 10 tokens", "type": "x",
                                        "code": None})
    if p in ("tool", "tool-boom", "tool-fail", "tool-opaque", "bad-json", "unknown-tool",
             "non-object") and not tool_msgs:
        calls = {"tool": [("add", {"a": 1, "b": 2})], "tool-boom": [("add", {"a": "boom"})],
                 "tool-opaque": [("add", {"a": "opaque"})],
                 "tool-fail": [("add", {"a": "fail"})], "bad-json": [("add", "{not json")],
                 "unknown-tool": [("nope", {})], "non-object": [("add", "[1, 2]")]}[p]
        return Reply(tool_calls=calls)
    if p == "loop":
        return Reply(tool_calls=[("add", {"a": 1, "b": 1})])
    if p == "budget":
        return Reply(tool_calls=[("add", {"a": 1, "b": 1})] * 3)
    return Reply("<answer>3</answer>")


async def run_one(prompt: str, env=None, **kw):
    with ScriptedServer(by_prompt) as server:
        groups = await run_groups(env or Env(), server, [example(prompt, **kw), example("ok")], group_size=2)
    assert all(r.termination_reason == "finished" and r.rewards == {"correct": 1.0} for r, _ in groups[1]), \
        "the sibling group must be unaffected"
    return groups[0]


@pytest.mark.parametrize("prompt,kind,reason,error_part", [
    ("ok", None, "finished", None),
    ("length", None, "output_exceeded", None),
    ("ctx", None, "context_exceeded", None),
    ("loop", None, "max_turns_exceeded", None),
    ("budget", None, "tool_budget_exceeded", None),
    ("http500", None, "model_error", "HTTP 500"),
    ("tool-boom", None, "tool_error", "tool exploded"),
    ("tool-fail", None, "sandbox_unavailable", "no sandbox"),
    ("tool-opaque", None, "tool_error", "returned a object, which is neither a str nor JSON-serialisable"),
    ("ok", "fail-reward", "reward_error", "judge down"),
    ("ok", "bad-reward", "reward_error", "finite"),
    ("ok", "str-reward", "reward_error", "numbers"),
])
async def test_termination_reasons(prompt, kind, reason, error_part):
    group = await run_one(prompt, kind=kind)
    for r, calls in group:
        assert r.termination_reason == reason, r.error
        if error_part:
            assert error_part in r.error and r.rewards == {}
            [failure] = [rec for rec in r.logs if rec.logger == "looprl.failure"]
            assert failure.level_name == "ERROR" and failure.message.startswith(f"rollout ended {reason}: ")
        else:
            assert r.error is None and r.rewards == {"correct": 1.0}
        assert calls, "every model call is recorded under its rollout"


@pytest.mark.parametrize("prompt,text", [
    ("bad-json", "not valid JSON"), ("unknown-tool", "unknown tool 'nope'"), ("non-object", "must be a JSON object")])
async def test_model_tool_mistakes_become_tool_messages(prompt, text):
    group = await run_one(prompt)
    for r, _ in group:
        tool_msgs = [m for m in r.messages if m["role"] == "tool"]
        assert r.termination_reason == "finished" and text in tool_msgs[0]["content"]


async def test_tool_round_trip_and_turns():
    group = await run_one("tool")
    r, calls = group[0]
    assert [m["role"] for m in r.messages] == ["user", "assistant", "tool", "assistant"]
    assert r.messages[2]["content"] == "3" and r.turns == 2 and r.tool_calls == 1 and len(calls) == 2


class ContextEnv(Env):
    def __init__(self, where):
        self.where = where
        self.exited = []

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        if example.example_args.get("kind") == "ctx-fail" and self.where == "enter":
            raise OSError("cannot create workspace")
        yield
        self.exited.append(rollout_id)
        if example.example_args.get("kind") == "ctx-fail" and self.where == "exit":
            raise OSError("cannot clean up")


@pytest.mark.parametrize("where", ["enter", "exit"])
async def test_rollout_context_errors_are_env_error(where):
    env = ContextEnv(where)
    group = await run_one("ok", env=env, kind="ctx-fail")
    for r, _ in group:
        assert r.termination_reason == "env_error" and f"on {where}" in r.error and r.rewards == {}
    assert len(env.exited) == (2 if where == "enter" else 4)


class GroupEnv(Env):
    def __init__(self, mode):
        self.mode = mode

    async def compute_group_rewards(self, rollouts):
        if rollouts[0].example_args.get("kind") != "group":
            return {r.rollout_id: {"rank": 0.5} for r in rollouts}
        if self.mode == "raise":
            raise RuntimeError("ranker crashed")
        if self.mode == "wrong-ids":
            return {"someone-else": {"rank": 1.0}}
        return {rollouts[0].rollout_id: {"rank": 1.0}}


@pytest.mark.parametrize("mode", ["raise", "wrong-ids"])
async def test_group_reward_errors(mode):
    with ScriptedServer(by_prompt) as server:
        groups = await run_groups(GroupEnv(mode), server, [example("ok", kind="group"), example("ok")])
    assert {r.termination_reason for r, _ in groups[0]} == {"group_reward_error"}
    assert all(r.rewards == {} and r.error for r, _ in groups[0])
    assert all(r.rewards == {"correct": 1.0, "rank": 0.5} for r, _ in groups[1])


async def test_group_rewards_merge_and_may_be_partial():
    with ScriptedServer(by_prompt) as server:
        (group,) = await run_groups(GroupEnv("ok"), server, [example("ok", kind="group")])
    assert group[0][0].rewards == {"correct": 1.0, "rank": 1.0} and group[1][0].rewards == {"correct": 1.0}


async def test_group_rewards_see_context_still_open():
    seen = []

    class E(ContextEnv):
        async def compute_group_rewards(self, rollouts):
            seen.append(list(self.exited))
            return {}

    env = E("none")
    with ScriptedServer(by_prompt) as server:
        await run_groups(env, server, [example("ok")], group_size=3)
    assert seen == [[]], "rollout_context exits only after compute_group_rewards"
    assert len(env.exited) == 3


async def test_timeout_ends_only_the_slow_rollout():
    class Slow(Env):
        async def compute_reward(self, rollout):
            if rollout.example_args.get("kind") == "slow":
                await asyncio.sleep(30)
            return {"correct": 1.0}

    with ScriptedServer(by_prompt) as server:
        groups = await run_groups(Slow(), server, [example("ok", kind="slow"), example("ok")], timeout_s=1.0)
    assert {r.termination_reason for r, _ in groups[0]} == {"timeout"}
    assert {r.termination_reason for r, _ in groups[1]} == {"finished"}


def test_max_turns_is_required():
    class NoTurns(BaseEnv):
        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([])

        async def compute_reward(self, rollout):
            return {}

    assert any("max_turns" in p for p in contract_problems(NoTurns))


async def test_missing_max_turns_fails_rollouts_not_the_run():
    class NoTurns(Env):
        max_turns = None

    with ScriptedServer(by_prompt) as server:
        (group,) = await run_groups(NoTurns(), server, [example("ok")])
    assert all(r.termination_reason == "env_error" and "max_turns" in r.error for r, _ in group)
