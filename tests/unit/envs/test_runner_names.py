"""The class users subclass holds only their contract: any name a user gives a method of their own leaves the
runtime's behaviour unchanged, on looprl's `BaseEnv` and on the benchmax compatibility layer's.

The runtime's machinery lives on a runner that holds the env (`looprl.envs._runner`). A user env here
defines every name the runtime owns, or ever owned on `BaseEnv`: each attribute of every registered
runner class (collected, so a method added to a runner later is covered too) and the methods `BaseEnv`
itself carried before the runner existed. Each is a poison that records its call and returns a plain
dict, as upstream benchmax's math env's own `_score_rollout(self, rollout)` does. The env must still run,
score, re-score and validate exactly as without them, and the runtime must call none of them.
"""

from __future__ import annotations

import inspect
from abc import ABC

import pytest
from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.envs import BaseEnv, BaseRollout, Dataset
from looprl.envs.runtime_api import (
    contract_problems,
    has_group_reward_hook,
    rollout_from_result,
    score_group,
    score_rollout,
)
from looprl.interop.benchmax.compat.envs import BaseEnv as CompatBaseEnv

USER_CONTRACT = {"create_dataset", "compute_reward", "compute_group_rewards", "list_tools", "run_tool",
                 "rollout_context", "aclose", "max_turns", "max_tool_calls", "reward_weights", "run_group"}
"""seeds/001's `BaseEnv` surface, with `Environment`'s `reward_weights` and `run_group` (the lower-level contract
docs/environments.md documents; `BaseEnv` implements it by handing the group to the runner)."""

FORMER_BASE_ENV_NAMES = {"_run_and_score", "_score_rollout", "_exit_context", "_score_group", "_check_group_result",
                         "_settle_group_failure", "_result", "has_reward_hook", "has_group_reward_hook",
                         "contract_problems", "hook_problems", "limit_problems"}
"""What `BaseEnv` (and the compatibility layer's) carried of the runtime before it moved onto the runner."""


def runner_classes() -> set[type]:
    from looprl.envs._runner import _RUNNERS

    return {cls for runner in _RUNNERS.values() for cls in inspect.getmro(runner) if cls is not object}


def runtime_names() -> set[str]:
    own = {name for cls in runner_classes() for name in vars(cls) if not name.startswith("__")}
    return (own | FORMER_BASE_ENV_NAMES) - USER_CONTRACT


class _Blank(ABC):  # noqa: B024 (what every ABC subclass has: its attributes are no one's contract)
    pass


@pytest.mark.parametrize("base", [BaseEnv, CompatBaseEnv], ids=["native", "compat"])
def test_the_env_class_holds_only_the_user_contract(base):
    names = {n for n in dir(base) if not n.startswith("__")} - set(dir(_Blank))
    assert names <= USER_CONTRACT, f"{base.__module__}.{base.__name__} holds runtime names: {names - USER_CONTRACT}"


def test_the_runtime_names_are_collected_from_the_runners():
    names = runtime_names()
    assert {"run_and_score", "score_rollout", "exit_context", "score_group", "check_group_result",
            "settle_group_failure", "result", "contract_problems"} <= names
    assert not names & USER_CONTRACT


def colliding_env(base: type[BaseEnv]) -> tuple[type[BaseEnv], list[str]]:
    """A tool-using env on `base` that also defines every runtime name, each a poison that records its call."""
    calls: list[str] = []

    def poison(name: str):
        def method(self, *args, **kwargs):
            calls.append(name)
            return {"poisoned": 1.0}
        return method

    class Env(base):  # type: ignore[misc, valid-type]
        max_turns = 3

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([example("What is 2 + 3?", answer="5")])

        async def list_tools(self):
            return [{"type": "function", "function": {"name": "add", "parameters": {
                "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]

        async def run_tool(self, rollout_id, tool_name, **args):
            return args["a"] + args["b"]

        async def compute_reward(self, rollout: BaseRollout):
            return {"correct": float(rollout.messages[-1]["content"] == rollout.example_args["answer"])}

        async def compute_group_rewards(self, rollouts):
            return {r.rollout_id: {"first": float(i == 0)} for i, r in enumerate(rollouts)}

    for name in runtime_names():
        setattr(Env, name, poison(name))
    return Env, calls


def reply(body) -> Reply:
    tool_results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    return Reply(tool_results[-1]) if tool_results else Reply(tool_calls=[("add", {"a": 2, "b": 3})])


@pytest.mark.parametrize("base", [BaseEnv, CompatBaseEnv], ids=["native", "compat"])
async def test_user_methods_named_as_the_runtime_change_nothing(base):
    env_cls, calls = colliding_env(base)
    assert contract_problems(env_cls) == [] and has_group_reward_hook(env_cls)
    with ScriptedServer(reply) as server:
        [group] = await run_groups(env_cls(), server, [example("What is 2 + 3?", answer="5")], group_size=2)
    results = [r for r, _ in group]
    assert [(r.termination_reason, r.turns, r.tool_calls) for r in results] == [("finished", 2, 1)] * 2, results
    assert sorted(tuple(sorted(r.rewards.items())) for r in results) == [
        (("correct", 1.0), ("first", 0.0)), (("correct", 1.0), ("first", 1.0))]

    # re-scoring (`looprl rescore`, rollouts whose worker died) goes through the runner too
    env = env_cls()
    rollouts = [rollout_from_result(r, example("What is 2 + 3?", answer="5")) for r in results]
    for r in rollouts:
        r.rewards = {}
        await score_rollout(env, r)
    await score_group(env, rollouts, _request(rollouts))
    assert sorted(tuple(sorted(r.rewards.items())) for r in rollouts) == [
        (("correct", 1.0), ("first", 0.0)), (("correct", 1.0), ("first", 1.0))]
    assert calls == []


def _request(rollouts: list[BaseRollout]):
    from looprl.envs.types import GroupRequest

    first = rollouts[0]
    return GroupRequest(group_id=first.group_id, example=first.example, split=first.split,
                        rollout_ids=[r.rollout_id for r in rollouts], model="", base_url_template="")
