"""The env boundary: a message too large, or one that cannot be serialised, settles its own rollout.

Each test runs real env worker processes (`EnvServerHost`) against a scripted model server, with the
line limit (`env.max_message_bytes`) lowered, and checks that the rollout whose message does not fit
ends with a reason that says so while its siblings, its group's and other groups', finish, and that the
run goes on (a later group on the same worker is served).
"""

import asyncio
import textwrap

import pytest
from tests.support.harness import example
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.config import EnvRuntimeConfig
from looprl.envs.types import GroupRequest
from looprl.envserver.host import EnvServerHost
from looprl.session.groups import new_id

ENV = textwrap.dedent('''
    import time
    from looprl.envs import BaseEnv, Dataset, Environment, RolloutResult

    READ = {"type": "function", "function": {"name": "read", "description": "Read the file.",
                                             "parameters": {"type": "object", "properties": {}}}}


    class ToolEnv(BaseEnv):
        """One tool: its first caller on this worker gets `big` characters, every other rollout a few."""

        max_turns = 2

        def __init__(self, big=10_000_000):
            self.big, self.first = big, None

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([{"prompt_messages": [{"role": "user", "content": "read it"}]}])

        async def list_tools(self):
            return [READ]

        async def run_tool(self, rollout_id, tool_name, **args):
            self.first = self.first or rollout_id
            return "x" * self.big if rollout_id == self.first else "a small file"

        async def compute_reward(self, rollout):
            return {"ok": 1.0}


    class RawEnv(Environment):
        """Its own group loop: the first rollout's reply is an object JSON cannot carry, or `chars` characters."""

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([{"prompt_messages": [{"role": "user", "content": "hi"}]}])

        async def run_group(self, request):
            args, now = request.example.example_args, time.time()
            replies = {"unserialisable": object(), "huge": "y" * args.get("chars", 0)}
            return [RolloutResult(rollout_id=rid, group_id=request.group_id, example_id=request.example.id,
                                  split=request.split, termination_reason="finished", rewards={"ok": 1.0},
                                  messages=[*request.example.prompt_messages, {"role": "assistant", "content":
                                            replies.get(args.get("reply"), "fine") if i == 0 else "fine"}],
                                  started_at=now, finished_at=now)
                    for i, rid in enumerate(request.rollout_ids)]
''')


@pytest.fixture
def env_file(tmp_path):
    path = tmp_path / "boundary_env.py"
    path.write_text(ENV)
    return path


def tool_turns(body):
    """The scripted model: call `read` once, then answer."""
    return Reply("done") if body["messages"][-1]["role"] == "tool" else Reply(tool_calls=[("read", {})])


def request(url: str, size: int = 3, prompt: str = "hi", **args) -> GroupRequest:
    return GroupRequest(group_id=new_id(), example=example(prompt, **args), split="train",
                        rollout_ids=[new_id() for _ in range(size)], model="scripted", base_url_template=url)


async def started(runtime: EnvRuntimeConfig, tmp_path, worker_limit: int | None = None) -> EnvServerHost:
    host = EnvServerHost(runtime, tmp_path / "run", splits=["train"])
    if worker_limit is not None:  # a worker that does not hold to the server's limit (what else could write so?)
        server = host.servers["train"]
        server._config = server._config.model_copy(update={
            "runtime": runtime.model_copy(update={"max_message_bytes": worker_limit})})
    await host.start()
    return host


async def submit(host: EnvServerHost, *requests: GroupRequest):
    return await asyncio.wait_for(asyncio.gather(*(host.submit_group(r) for r in requests)), 120)


async def test_a_ten_megabyte_tool_result_is_cut_with_a_marker_and_its_siblings_finish(tmp_path, env_file):
    host = await started(EnvRuntimeConfig(source=f"{env_file}:ToolEnv", max_tool_result_chars=50_000), tmp_path)
    try:
        with ScriptedServer(tool_turns) as server:
            [group] = await submit(host, request(server.base_url))
    finally:
        await host.aclose()
    assert [r.termination_reason for r in group] == ["finished"] * 3
    tool_messages = [next(m for m in r.messages if m["role"] == "tool")["content"] for r in group]
    [cut] = [m for m in tool_messages if m != "a small file"]
    assert cut.startswith("x" * 50_000) and len(cut) < 50_200
    assert cut.endswith("…[truncated: 9,950,000 of 10,000,000 characters cut; the tool result cap is 50,000 "
                        "characters]")
    # the model read the cut text, and the rollout's log says what was cut
    assert max(len(m.get("content") or "") for body in server.requests for m in body["messages"]) < 50_200
    [owner] = [r for r in group if cut in [m.get("content") for m in r.messages]]
    assert any("env.max_tool_result_chars" in record.message for record in owner.logs)


async def test_a_result_over_the_line_limit_fails_that_rollout_alone(tmp_path, env_file):
    runtime = EnvRuntimeConfig(source=f"{env_file}:ToolEnv", max_tool_result_chars=300_000,
                               max_message_bytes=200_000)
    host = await started(runtime, tmp_path)
    try:
        with ScriptedServer(tool_turns) as server:
            groups = await submit(host, request(server.base_url), request(server.base_url))
            # a request the worker could not read (its prompt is over the limit) fails before it is sent
            [too_big] = await submit(host, request(server.base_url, size=2, prompt="z" * 300_000))
            [after] = await submit(host, request(server.base_url))
    finally:
        await host.aclose()
    reasons = sorted(r.termination_reason for group in groups for r in group)
    assert reasons == ["finished"] * 5 + ["message_too_large"]
    [failed] = [r for group in groups for r in group if r.termination_reason == "message_too_large"]
    assert "200,000-byte limit" in failed.error and "env.max_message_bytes" in failed.error
    assert failed.messages == [{"role": "user", "content": "hi"}]
    assert failed.logs[-1].logger == "looprl.failure" and "message_too_large" in failed.logs[-1].message
    assert {r.termination_reason for r in too_big} == {"message_too_large"} and "request" in too_big[0].error
    assert {r.termination_reason for r in after} == {"finished"}


async def test_the_server_reads_out_an_overlong_line_and_fails_only_the_group_it_answers(tmp_path, env_file):
    runtime = EnvRuntimeConfig(source=f"{env_file}:RawEnv", max_message_bytes=100_000)
    host = await started(runtime, tmp_path, worker_limit=1 << 30)
    pid = host.servers["train"]._slots[0].proc.pid
    try:
        huge, fine = await submit(host, request("http://unused", reply="huge", chars=2_000_000),
                                  request("http://unused"))
        [after] = await submit(host, request("http://unused"))
    finally:
        await host.aclose()
    assert {r.termination_reason for r in huge} == {"message_too_large"}
    assert "group_done message" in huge[0].error and "100,000-byte limit" in huge[0].error
    assert {r.termination_reason for r in fine} == {"finished"} == {r.termination_reason for r in after}
    assert host.servers["train"]._slots[0].proc.pid == pid, "the worker was not restarted: the stream stayed in step"


async def test_a_result_the_worker_cannot_serialise_fails_that_rollout_instead_of_hanging(tmp_path, env_file):
    host = await started(EnvRuntimeConfig(source=f"{env_file}:RawEnv"), tmp_path)
    try:
        bad, fine = await submit(host, request("http://unused", reply="unserialisable"), request("http://unused"))
    finally:
        await host.aclose()
    assert [r.termination_reason for r in bad] == ["env_error", "finished", "finished"]
    assert "cannot be sent" in bad[0].error and "object" in bad[0].error
    assert {r.termination_reason for r in fine} == {"finished"}
