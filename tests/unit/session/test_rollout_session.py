"""`RolloutSession`: the one path `rl`, `eval` and `validate` roll out through; it marks the run's end
status, and its reward totals use the run's `reward_weights`."""

import asyncio
import json
import sqlite3

import pytest
from tests.support.scripted_server import Reply, ScriptedServer

import looprl.session.rollouts
from looprl.cli import main
from looprl.commands.eval.run import EvalRunConfig, prepare_output, run_eval
from looprl.config import EnvRuntimeConfig, LogLimits, RLConfig, load_config
from looprl.envs.types import RolloutResult
from looprl.gateway.app import Gateway
from looprl.orchestrator.loop import Orchestrator
from looprl.session import RolloutSession

ENV = "examples/arithmetic/env.py:ArithmeticEnv"


def session(run_dir, **kwargs) -> RolloutSession:
    return RolloutSession(run_dir, kind="eval", env=EnvRuntimeConfig(source=ENV),
                          gateway=Gateway("http://127.0.0.1:9/v1", "m"), config={}, splits=["eval"], **kwargs)


def run_status(run_dir) -> str:
    with sqlite3.connect(run_dir / "looprl.db") as db:
        return db.execute("SELECT status FROM runs").fetchone()[0]


def test_a_failed_session_leaves_a_failed_run_that_overwrite_replaces(tmp_path):
    run_dir = tmp_path / "run"

    async def fail() -> None:
        async with session(run_dir) as s:
            assert len(await s.dataset("eval", max_examples=2)) == 2
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        asyncio.run(fail())
    assert run_status(run_dir) == "failed" and (run_dir / "logs" / "envs" / "eval").is_dir()
    prepare_output(run_dir, overwrite=True)
    assert not (run_dir / "looprl.db").exists() and not (run_dir / "logs").exists()


def test_score_uses_the_run_reward_weights(tmp_path):
    s = session(tmp_path / "run", reward_weights={"correct": 3.0})
    common = dict(group_id="g", example_id="e", split="eval", messages=[], started_at=0.0, finished_at=1.0)
    scored = RolloutResult(rollout_id="a", rewards={"correct": 1.0, "format": 0.5}, termination_reason="finished",
                           **common)
    failed = RolloutResult(rollout_id="b", termination_reason="env_error", **common)
    assert s.score(scored) == 3.5 and s.score(failed) is None


def test_rl_eval_and_validate_roll_out_through_a_session(tmp_path, monkeypatch, capsys):
    kinds = []
    enter = RolloutSession.__aenter__

    async def spy(self):
        kinds.append(self.run.kind)
        return await enter(self)

    monkeypatch.setattr(looprl.session.rollouts.RolloutSession, "__aenter__", spy)
    with ScriptedServer(lambda body: Reply("<answer>1</answer>")) as server:
        assert main(["eval", ENV, "--base-url", server.base_url, "-n", "1", "-r", "1", "-o", str(tmp_path / "e")]) == 0
        assert main(["validate", ENV, "--base-url", server.base_url]) == 0
    assert kinds == ["eval", "validate"]
    cfg = load_config(RLConfig, ["--env.source", ENV, "--orchestrator.reward_weights.correct", "2"])
    orchestrator = Orchestrator(cfg, tmp_path / "rl", ["http://127.0.0.1:9"], "m")
    assert orchestrator.session.run.kind == "rl" and orchestrator.session.reward_weights == {"correct": 2.0}
    assert json.dumps(orchestrator.session.summary) == json.dumps({"steps": cfg.max_steps})


async def roll_one(session: RolloutSession, split: str) -> RolloutResult:
    async with session:
        [first] = await session.dataset(split, max_examples=1)
        [(result, _)] = await session.roll_out(first, split, 1)
    return result


def test_rl_and_eval_honour_json_logging_and_log_limits(tmp_path):
    """Both build one `EnvRuntimeConfig` that reaches the workers whole: with `json_logging` the env server
    logs JSON lines, and `log_limits.max_records = 0` drops the one record ArithmeticEnv logs per rollout."""
    eval_results: list = []
    with ScriptedServer(lambda body: Reply("<answer>1</answer>")) as server:
        cfg = load_config(RLConfig, ["--env.source", ENV, "--env.eval_split", "train",  # one env server, not two
                                     "--log.json_logging", "true", "--log.env_limits.max_records", "0"])
        rl = Orchestrator(cfg, tmp_path / "rl", [server.base_url.removesuffix("/v1")], "scripted")
        rl_result = asyncio.run(roll_one(rl.session, "train"))
        runtime = EnvRuntimeConfig(source=ENV, json_logging=True, log_limits=LogLimits(max_records=0))
        asyncio.run(run_eval(EvalRunConfig(env=runtime, num_examples=1, rollouts_per_example=1, model="scripted",
                                        base_url=server.base_url, output=tmp_path / "eval"), eval_results.extend))
    for run_dir, result in ((tmp_path / "rl", rl_result), (tmp_path / "eval", eval_results[0])):
        assert result.termination_reason == "finished" and result.logs == [] and result.logs_dropped == 1
        lines = [line for log in run_dir.glob("logs/envs/*/*/env_server.log") for line in log.read_text().splitlines()]
        assert lines and all(json.loads(line) for line in lines)
