"""`looprl logs`: one unwrapped line per record when piped, env loggers under the env module's own
name, and an empty result said on stderr with exit 0."""

import asyncio
import json
import sys

import pytest
from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer
from tests.unit.inspector.fake_store import T0, build_store, record

from looprl.cli import main
from looprl.envserver.loading import instantiate, load_env_class
from looprl.store.records import RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter

ENV_FILE = '''
import logging

from looprl.envs import BaseEnv, Dataset

logger = logging.getLogger(__name__)


class ScoringEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def compute_reward(self, rollout):
        logger.info("scored %s", rollout.rollout_id)
        return {"x": 1.0}
'''


@pytest.fixture
def forget_env_modules():
    """Env files these tests load under their own names leave `sys.modules` as they found it."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if "_env" in name:
            del sys.modules[name]


def write_run(run_dir, records):
    w = RunStoreWriter(run_dir)
    w.start_run(RunInfo(run_id="run-1", kind="eval", env="env.py:Env", env_name="Env", model="m", created_at=T0))
    w.write_rollouts(records)
    w.close()
    return run_dir


def test_env_loggers_carry_the_env_module_name(tmp_path, monkeypatch, capsys, forget_env_modules):
    (tmp_path / "scoring_env.py").write_text(ENV_FILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = instantiate(load_env_class(f"{tmp_path}/scoring_env.py:ScoringEnv"), {})
    with ScriptedServer(lambda body: Reply("done")) as server:
        [group] = asyncio.run(run_groups(env, server, [example("hi")], group_size=1))
    records = [RolloutRecord.from_result(r, run_id="run-1", env_name="Env", step=0, reward=1.0, advantage=None,
                                         model_calls=calls) for r, calls in group]
    run_dir = write_run(tmp_path / "run", records)
    assert main(["logs", str(run_dir), "--json"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["logger"] == "scoring_env"
    assert main(["logs", str(run_dir)]) == 0
    assert " scoring_env:" in capsys.readouterr().out


def test_an_env_file_whose_name_is_taken_still_loads_apart(tmp_path, monkeypatch, forget_env_modules):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "twin_env.py").write_text(ENV_FILE)
        monkeypatch.syspath_prepend(str(tmp_path / folder))
    first = load_env_class(f"{tmp_path}/a/twin_env.py:ScoringEnv")
    second = load_env_class(f"{tmp_path}/b/twin_env.py:ScoringEnv")
    assert first.__module__ == "twin_env" and second.__module__.startswith("looprl_env_twin_env_")
    assert load_env_class(f"{tmp_path}/a/twin_env.py:ScoringEnv") is first


def test_piped_records_are_never_wrapped(tmp_path, capsys):
    message = "a long record " + "x" * 200
    run_dir = write_run(tmp_path / "run", [record(0, step=0, logs=[(20, "env", message)])])
    assert main(["logs", str(run_dir)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.endswith(f"env:10 {message}") and "train-0-0" in line


def test_no_records_is_said_on_stderr(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", [record(0, step=0)])
    assert main(["logs", str(run_dir)]) == 0
    assert capsys.readouterr() == ("", "no log records in this run\n")
    assert main(["logs", str(run_dir), "--rollout", "train-0-0", "--json"]) == 0
    assert capsys.readouterr() == ("", "no log records for rollout train-0-0\n")
    populated = build_store(tmp_path / "toy")
    assert main(["logs", str(populated), "--rollout", "train-0-3", "--level", "error"]) == 0
    assert capsys.readouterr() == ("", "no log records at ERROR or above for rollout train-0-3\n")
