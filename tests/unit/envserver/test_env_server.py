"""Env servers and worker processes: crashes, hangs and logs, against a scripted model server."""

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
    import asyncio, ctypes, logging, os, signal, sys, time, warnings
    from looprl.envs import BaseEnv, Dataset

    logger = logging.getLogger("test_env")

    class Env(BaseEnv):
        max_turns = 1

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([{"prompt_messages": [{"role": "user", "content": f"q{i}"}]} for i in range(3)],
                           max_examples=max_examples)

        async def compute_reward(self, rollout):
            kind = rollout.example_args.get("kind")
            logger.info("scoring %s", kind)
            if kind == "segv":
                ctypes.string_at(0)
            if kind == "exit":
                os._exit(3)
            if kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if kind == "block":
                time.sleep(60)
            if kind == "sleep":
                await asyncio.sleep(60)
            if kind == "badlog":
                logger.info("a bad format %d", "x")
            if kind == "print":
                print("printed by", rollout.rollout_id, end="")
                print(" in parts")
                await asyncio.to_thread(print, "from a thread", rollout.rollout_id, file=sys.stderr)
                warnings.warn(f"warned {rollout.rollout_id}")
            return {"correct": 1.0}
''')


@pytest.fixture
def env_spec(tmp_path):
    path = tmp_path / "crashy_env.py"
    path.write_text(ENV)
    return f"{path}:Env"


def request(server, kind: str, size: int = 2, timeout_s: float | None = None) -> GroupRequest:
    return GroupRequest(group_id=new_id(), example=example("hi", kind=kind), split="train",
                        rollout_ids=[new_id() for _ in range(size)], model="scripted",
                        base_url_template=server.base_url, timeout_s=timeout_s)


async def run(host, requests):
    return await asyncio.gather(*(host.submit_group(r) for r in requests))


async def test_a_dying_worker_fails_exactly_its_rollouts_and_is_respawned(tmp_path, env_spec):
    host = EnvServerHost(EnvRuntimeConfig(source=env_spec, workers=2), tmp_path / "run", splits=["train"])
    await host.start()
    try:
        with ScriptedServer(lambda body: Reply("ok")) as server:
            for kind in ("segv", "exit", "kill"):  # a segfault, os._exit in env code, SIGKILL
                dying, healthy = request(server, kind), request(server, "ok")
                died, fine = await run(host, [dying, healthy])
                assert [r.rollout_id for r in died] == dying.rollout_ids
                assert {r.termination_reason for r in died} == {"env_worker_died"}, kind
                assert "died" in died[0].error
                # records before the death are kept, and the failure says how it ended
                assert any(rec.message == f"scoring {kind}" for r in died for rec in r.logs)
                assert all(r.logs[-1].logger == "looprl.failure" and "died" in r.logs[-1].message for r in died)
                assert [(r.termination_reason, r.rewards) for r in fine] == [("finished", {"correct": 1.0})] * 2
            after = await run(host, [request(server, "ok"), request(server, "ok")])
            assert {r.termination_reason for group in after for r in group} == {"finished"}
    finally:
        await host.aclose()
    server_log = (tmp_path / "run/logs/envs/train/Env/env_server.log").read_text()
    assert "SIGSEGV" in server_log and "exit status 3" in server_log and "SIGKILL" in server_log
    assert server_log.count("respawning worker") == 3


async def test_a_hook_that_blocks_or_sleeps_past_its_timeout_ends_as_timeout(tmp_path, env_spec):
    host = EnvServerHost(EnvRuntimeConfig(source=env_spec, timeout_grace_s=1.0), tmp_path / "run", splits=["train"])
    await host.start()
    try:
        with ScriptedServer(lambda body: Reply("ok")) as server:
            # one blocking rollout: a sibling would share its blocked loop and, on a loaded machine, may not
            # yet be past its own timeout when the worker is killed (then it is env_worker_died, rightly)
            blocked, slept = await run(host, [request(server, "block", size=1, timeout_s=0.5),
                                             request(server, "sleep", timeout_s=0.5)])
            assert {r.termination_reason for r in blocked} == {"timeout"}
            assert {r.termination_reason for r in slept} <= {"timeout", "env_worker_died"}
            [after] = await run(host, [request(server, "ok", timeout_s=30)])
            assert {r.termination_reason for r in after} == {"finished"}
    finally:
        await host.aclose()


async def test_async_timeouts_stay_inside_the_worker(tmp_path, env_spec):
    host = EnvServerHost(EnvRuntimeConfig(source=env_spec), tmp_path / "run", splits=["train"])
    await host.start()
    try:
        with ScriptedServer(lambda body: Reply("ok")) as server:
            slept, fine = await run(host, [request(server, "sleep", timeout_s=0.5), request(server, "ok")])
        assert {r.termination_reason for r in slept} == {"timeout"}
        assert {r.termination_reason for r in fine} == {"finished"}
    finally:
        await host.aclose()
    assert "respawning" not in (tmp_path / "run/logs/envs/train/Env/env_server.log").read_text()


async def test_datasets_logs_and_captured_records(tmp_path, env_spec):
    run_dir = tmp_path / "run"
    host = EnvServerHost(EnvRuntimeConfig(source=env_spec, level="INFO"), run_dir)
    await host.start()
    try:
        dataset = await host.create_dataset("eval", tmp_path, max_examples=2)
        assert [e.prompt_messages[0]["content"] for e in dataset] == ["q0", "q1"]
        with ScriptedServer(lambda body: Reply("ok")) as server:
            [results, bad_log] = await run(host, [request(server, "ok"), request(server, "badlog")])
    finally:
        await host.aclose()
    assert all(any(rec.message == "scoring ok" for rec in r.logs) for r in results)
    # a logging call whose arguments do not fit its format is logged as it is and never fails the rollout
    assert [(r.termination_reason, r.rewards) for r in bad_log] == [("finished", {"correct": 1.0})] * 2
    assert all(any(rec.message == "'a bad format %d' % ('x',) (logging error: TypeError: %d format: a real number "
                                  "is required, not str)" for rec in r.logs) for r in bad_log)
    worker_log = (run_dir / "logs/envs/train/Env/env_worker_0.log").read_text()
    for r in results:
        assert any(f"rollout={r.rollout_id}" in line and "scoring ok" in line for line in worker_log.splitlines())
    assert (run_dir / "logs/envs/eval/Env/env_server.log").exists()
    assert (run_dir / "logs/envs/eval/Env/env_worker_0.log").exists()


async def test_an_env_that_cannot_load_fails_start_with_its_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('broken import')\n")
    host = EnvServerHost(EnvRuntimeConfig(source=f"{bad}:Env"), tmp_path / "run", splits=["train"])
    with pytest.raises(Exception, match="broken import"):
        await host.start()


async def test_print_stderr_and_warnings_are_records_of_their_rollout_under_load(tmp_path, env_spec):
    host = EnvServerHost(EnvRuntimeConfig(source=env_spec, workers=2), tmp_path / "run", splits=["train"])
    await host.start()
    try:
        with ScriptedServer(lambda body: Reply("ok")) as server:
            groups = await run(host, [request(server, "print", size=4) for _ in range(25)])
    finally:
        await host.aclose()
    results = [r for g in groups for r in g]
    assert len(results) == 100 and {r.termination_reason for r in results} == {"finished"}
    for r in results:
        records = {(rec.logger, rec.message) for rec in r.logs}
        assert ("stdout", f"printed by {r.rollout_id} in parts") in records
        assert ("stderr", f"from a thread {r.rollout_id}") in records
        assert any(name == "py.warnings" and f"warned {r.rollout_id}" in m for name, m in records)
        assert len(r.logs) == 4, r.logs  # nothing from the siblings
