"""The seeds' code samples run as written (import root `looprl`), with only their placeholders filled in."""


from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer
from tests.unit.seeds import seed_000_logging, seed_001_base_env

from looprl.envs import BaseRollout, Dataset, Example
from looprl.envs.runtime_api import contract_problems


class LoggingSeedEnv(seed_000_logging.MyEnv):
    """seeds/000's MyEnv; the helpers it calls (`_dispatch`, `_judge`, ...) are the user's own."""

    max_turns = 2
    compute_group_rewards = seed_000_logging.compute_group_rewards

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def list_tools(self):
        return [{"type": "function",
                 "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]

    async def _dispatch(self, tool_name, **args):
        return {"found": args}

    def _extract_answer(self, messages):
        return messages[-1]["content"]

    async def _judge(self, text, truth):
        return float(truth in text)

    def _score(self, messages):
        return 0.5


def script(body) -> Reply:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return Reply(tool_calls=[("lookup", {"q": "x"})])
    return Reply("the answer is 42")


async def test_seed_000_logging_samples_attribute_records():
    with ScriptedServer(script) as server:
        (group,) = await run_groups(LoggingSeedEnv(), server, [example("q", ground_truth="42")], group_size=2)
    for r, _ in group:
        assert r.termination_reason == "finished" and r.rewards == {"correctness": 1.0, "quality": 0.5}
        messages = [rec.message for rec in r.logs]
        assert messages[0] == "calling lookup with {'q': 'x'}"
        assert messages[1].startswith("result: {'found'")
        assert messages[2] == "score: 1.0, answer: the answer is 42"
        assert messages[3:] == ["scoring group", "scoring individual rollout"]


async def test_seed_001_interface_is_a_valid_env(tmp_path):
    env = seed_001_base_env.MyEnv()
    assert contract_problems(type(env)) == []
    rollout = BaseRollout(rollout_id="r", group_id="g", split="eval",
                          example=Example(id="e", payload={"prompt_messages": [{"role": "user", "content": "2+2"}],
                                                           "answer": "4"}),
                          messages=[{"role": "user", "content": "2+2"}, {"role": "assistant", "content": "4"}])
    assert await env.compute_reward(rollout) == {"correct": 1.0}
    async with env.rollout_context("r", rollout.example):
        pass
    await env.aclose()
