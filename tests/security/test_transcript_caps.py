"""A transcript past `env.max_transcript_chars` ends its rollout as `transcript_too_large`, whatever env made it.

`BaseEnv`'s chat loop stops the rollout as soon as its transcript passes the cap; the runtime holds every
environment's results to the same cap (an `Environment` with its own loop included), keeping the leading
messages that fit. Siblings are untouched.
"""

import json
import time

from tests.support.harness import example
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.config import EnvRuntimeConfig
from looprl.envs import BaseEnv, Dataset, Environment, RolloutResult
from looprl.envs.types import GroupRequest
from looprl.envserver.runtime import caps_of, run_group_captured
from looprl.session.groups import new_id

READ = {"type": "function", "function": {"name": "read", "description": "Read the next page.",
                                         "parameters": {"type": "object", "properties": {}}}}
CAPS = caps_of(EnvRuntimeConfig(source="unused.py:Env", max_tool_result_chars=30_000, max_transcript_chars=100_000))


class PagingEnv(BaseEnv):
    """A tool whose pages are long for one rollout and short for the others; the model reads page after page."""

    max_turns = 10

    def __init__(self, long_for: str) -> None:
        self.long_for = long_for

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def list_tools(self):
        return [READ]

    async def run_tool(self, rollout_id, tool_name, **args):
        return "p" * 40_000 if rollout_id == self.long_for else "a short page"

    async def compute_reward(self, rollout):
        return {"ok": 1.0}


class OwnLoopEnv(Environment):
    """Its own group loop; the first rollout's transcript is ten messages of 20,000 characters."""

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def run_group(self, request):
        now = time.time()
        return [RolloutResult(rollout_id=rid, group_id=request.group_id, example_id=request.example.id,
                              split=request.split, termination_reason="finished", rewards={"ok": 1.0},
                              messages=[*request.example.prompt_messages,
                                        *([{"role": "assistant", "content": "w" * 20_000}] * (10 if i == 0 else 1))],
                              started_at=now, finished_at=now)
                for i, rid in enumerate(request.rollout_ids)]


def request(url: str) -> GroupRequest:
    return GroupRequest(group_id=new_id(), example=example("read on"), split="train",
                        rollout_ids=[new_id() for _ in range(3)], model="scripted", base_url_template=url)


def size(messages) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False, separators=(",", ":"))) for m in messages)


async def test_base_env_ends_a_rollout_whose_transcript_passes_its_cap():
    with ScriptedServer(lambda body: Reply(tool_calls=[("read", {})])) as server:
        group = request(server.base_url)
        results = await run_group_captured(PagingEnv(long_for=group.rollout_ids[0]), group, caps=CAPS)
    long, *others = results
    assert long.termination_reason == "transcript_too_large" and not long.rewards
    assert "over its cap of 100,000 (env.max_transcript_chars)" in long.error
    # each page was cut to 30,000 characters: the cap was passed on the fourth, and only what fits is kept
    assert long.tool_calls == 4 and size(long.messages) <= 100_000
    assert "keeps its first" in long.error and long.logs[-1].logger == "looprl.failure"
    assert [r.termination_reason for r in others] == ["max_turns_exceeded"] * 2 and all(r.rewards for r in others)


async def test_the_runtime_holds_any_environment_to_the_transcript_cap():
    results = await run_group_captured(OwnLoopEnv(), request("http://unused"), caps=CAPS)
    long, *others = results
    assert long.termination_reason == "transcript_too_large" and not long.rewards
    assert len(long.messages) == 5 and size(long.messages) <= 100_000  # the prompt and four replies fit
    assert "reached 200,3" in long.error and "keeps its first 5 of 11 messages" in long.error
    assert [r.termination_reason for r in others] == ["finished"] * 2


def test_replay_holds_a_rollout_to_the_caps_its_run_had():
    from looprl.commands.stored import transcript_caps
    from looprl.envs.runtime_api import TranscriptCaps
    from looprl.store.records import RunInfo

    runtime = EnvRuntimeConfig(source="unused.py:Env", max_tool_result_chars=30_000, max_transcript_chars=100_000)
    stored = RunInfo(run_id="r", kind="eval", env="unused.py:Env", env_name="e", model="m", created_at=0.0,
                     config={"env": runtime.model_dump(mode="json")})
    assert transcript_caps(stored) == caps_of(runtime) == CAPS
    older = stored.model_copy(update={"config": {"env": {"source": "unused.py:Env"}}})
    assert transcript_caps(older) == TranscriptCaps(), "a run stored before the caps existed was not capped"
