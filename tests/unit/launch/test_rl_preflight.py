"""`looprl rl` checks the env import and the train split's first rows before it starts the engine."""

import json

import pytest

import looprl.inference.process
from looprl.cli import main


class NoEngine:
    def __init__(self, *args, **kwargs) -> None:
        raise AssertionError("the engine started")


@pytest.mark.parametrize("source,train,message", [
    ("tests/support/rl_env.py:CharsEnv", "{not json\n", "train.jsonl:1: invalid JSON"),
    ("tests/support/rl_env.py:Missing", "", "has no attribute 'Missing'"),
])
def test_rl_user_errors_come_before_the_engine(source, train, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(looprl.inference.process, "EngineProcess", NoEngine)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text(train)
    config = tmp_path / "rl.toml"
    config.write_text(f'output_dir = {json.dumps(str(tmp_path / "run"))}\n'
                      f'[env]\nsource = "{source}"\nbase_dir = {json.dumps(str(data))}\n')
    status = main(["rl", "@", str(config)])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("env_args,message", [
    ("{bad", "--env-args is not valid JSON"),
    ("[1]", "--env-args must be a JSON object"),
    ('{"nope": 1}', "cannot construct CharsEnv with env args {'nope': 1}"),
])
def test_rl_env_args_are_checked_before_the_engine(env_args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(looprl.inference.process, "EngineProcess", NoEngine)
    config = tmp_path / "rl.toml"
    config.write_text(f'output_dir = {json.dumps(str(tmp_path / "run"))}\n'
                      '[env]\nsource = "tests/support/rl_env.py:CharsEnv"\n')
    assert main(["rl", "@", str(config), "--env-args", env_args]) == 2
    assert message in capsys.readouterr().err
