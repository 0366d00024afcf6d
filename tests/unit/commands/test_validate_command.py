"""`looprl validate`: a class that is not an env is exit 2 before the engine starts; every check is
listed with ✓ or ✗; the temporary run directory (engine log, env logs, store) is removed."""

import tempfile

from tests.support.scripted_server import Reply, ScriptedServer

from looprl.cli import main


def test_a_class_that_is_not_an_env_is_exit_2_before_the_engine(engine, capsys):
    status = main(["validate", "examples/arithmetic/env.py:logging"])
    err = capsys.readouterr().err
    assert status == 2 and "is not an environment" in err and len(err.strip().splitlines()) == 1
    assert not engine.started


def test_validate_lists_its_checks_and_leaves_no_temp_folder(engine, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with ScriptedServer(lambda body: Reply("<answer>4</answer>")) as server:
        engine.base_url = server.base_url
        assert main(["validate", "examples/arithmetic/env.py:ArithmeticEnv"]) == 0
    out = capsys.readouterr().out
    assert len(engine.started) == 1 and not engine.started[0].exists()
    assert list(tmp_path.iterdir()) == []
    for check in ("imports and is an environment", "hooks and class attributes", "create_dataset('train')",
                  "create_dataset('eval')", "list_tools", "one group of 2 rollouts"):
        assert f"✓ {check}" in out, out
    assert "✗" not in out and "ArithmeticEnv: OK" in out


def test_a_failed_check_is_marked(tmp_path, capsys):
    env = tmp_path / "empty.py"
    env.write_text(
        "from looprl.envs import BaseEnv, Dataset\n"
        "class Empty(BaseEnv):\n"
        "    max_turns = 1\n"
        "    async def create_dataset(self, split, base_dir, *, max_examples=None):\n"
        "        return Dataset([{'prompt_messages': [{'role': 'user', 'content': 'x'}]}]"
        " if split == 'train' else [])\n"
        "    async def compute_reward(self, rollout):\n"
        "        return {'ok': 1.0}\n")
    with ScriptedServer(lambda body: Reply("hi")) as server:
        assert main(["validate", f"{env}:Empty", "--base-url", server.base_url]) == 1
    out = capsys.readouterr().out
    assert "✓ create_dataset('train')" in out and "✗ create_dataset('eval')" in out and "returned no examples" in out
    assert "✓ one group of 2 rollouts" in out and "Empty: 1 contract problem(s)" in out
