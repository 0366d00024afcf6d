"""`looprl eval`, `rollouts`, `logs` and `validate` end to end, as a user runs them, against a scripted server."""

import json
import re

import pytest
from tests.support.cli import looprl
from tests.support.scripted_server import Reply, ScriptedServer


def solve(body) -> Reply:
    """Right on additions, wrong on subtractions: a mixed summary."""
    question = body["messages"][-1]["content"]
    a, op, b = re.search(r"(\d+) ([-+]) (\d+)", question).groups()
    value = int(a) + int(b) if op == "+" else 0
    return Reply(f"<answer>{value}</answer>")


def calculate(body) -> Reply:
    tool_results = [m for m in body["messages"] if m["role"] == "tool"]
    if not tool_results:
        expression = re.search(r"Compute (.*)\.", body["messages"][-1]["content"]).group(1)
        return Reply(tool_calls=[("calculator", {"expression": expression})])
    return Reply(f"<answer>{tool_results[-1]['content']}</answer>")


def test_eval_writes_a_run_and_prints_a_summary(tmp_path):
    out = tmp_path / "run"
    with ScriptedServer(solve) as server:
        proc = looprl("eval", "examples/arithmetic/env.py:ArithmeticEnv", "--base-url", server.base_url,
                      "-n", "6", "-r", "2", "--split", "train", "--seed", "3", "--output", str(out))
    assert "Rewards" in proc.stdout and "correct" in proc.stdout and "finished" in proc.stdout
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    assert len(rows) == 12 and len({r["group_id"] for r in rows}) == 6
    required = {"rollout_id", "step", "split", "example_id", "group_id", "termination_reason", "error", "rewards",
                "reward", "messages"}
    assert all(required <= set(r) and r["split"] == "train" for r in rows)
    assert {r["rewards"]["format"] for r in rows} == {1.0}
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    assert len(logs) == 12 and {"rollout_id", "time", "level", "logger", "message", "exception"} <= set(logs[0])
    one = looprl("logs", str(out), "--rollout", rows[0]["rollout_id"], "--json").stdout.splitlines()
    assert len(one) == 1 and json.loads(one[0])["rollout_id"] == rows[0]["rollout_id"]
    assert rows[0]["rollout_id"] in looprl("rollouts", str(out)).stdout
    worker_log = (out / "logs/envs/train/ArithmeticEnv/env_worker_0.log").read_text()
    assert all(f"rollout={r['rollout_id']}" in worker_log for r in rows)
    again = looprl("eval", "examples/arithmetic/env.py:ArithmeticEnv", "--base-url", server.base_url,
                   "-n", "1", "-r", "1", "--output", str(out), check=False)
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_eval_of_a_tool_env(tmp_path):
    out = tmp_path / "calc"
    with ScriptedServer(calculate) as server:
        looprl("eval", "examples/calculator/env.py:CalculatorEnv", "--base-url", server.base_url,
               "-n", "3", "-r", "2", "--output", str(out))
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    assert all(r["rewards"] == {"correct": 1.0, "used_tool": 1.0} for r in rows)
    assert [m["role"] for m in rows[0]["messages"]] == ["system", "user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("example,cls", [("sqlite_lookup", "SqliteLookupEnv"), ("group_judge", "GroupJudgeEnv"),
                                         ("demo", "AdditionEnv"), ("two_digit", "TwoDigitEnv")])
def test_examples_validate(example, cls):
    def reply(body):
        if "query" in json.dumps(body.get("tools", [])) and not any(m["role"] == "tool" for m in body["messages"]):
            return Reply(tool_calls=[("query", {"sql": "SELECT name, age FROM people"})])
        return Reply("the sea is wide <answer>1</answer>")

    with ScriptedServer(reply) as server:
        proc = looprl("validate", f"examples/{example}/env.py:{cls}", "--base-url", server.base_url)
    assert f"{cls}: OK" in proc.stdout


def test_validate_reports_contract_problems(tmp_path):
    env = tmp_path / "bad.py"
    env.write_text(
        "from looprl.envs import BaseEnv, Dataset\n"
        "class Bad(BaseEnv):\n"
        "    max_turns = 1\n"
        "    async def create_dataset(self, split, base_dir, *, max_examples=None):\n"
        "        return Dataset([{'prompt_messages': [{'role': 'user', 'content': 'x'}]}])\n"
        "    async def list_tools(self):\n"
        "        return [{'type': 'function', 'function': {'name': 'bad name!', 'parameters': {'type': 'array'}}}]\n"
        "    async def compute_reward(self, rollout):\n"
        "        return {'score': 'high'}\n")
    with ScriptedServer(lambda b: Reply("hi")) as server:
        proc = looprl("validate", f"{env}:Bad", "--base-url", server.base_url, check=False)
    assert proc.returncode == 1
    assert "function.name" in proc.stdout and "parameters" in proc.stdout and "reward_error" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["eval", "nope.py:Env", "-o", "x"], "environment file not found"),
    (["eval", "examples/arithmetic/env.py", "-o", "x"], "bad environment"),
    (["eval", "examples/arithmetic/env.py:Missing", "-o", "x"], "has no attribute 'Missing'"),
    (["eval", "examples/arithmetic/env.py:logging", "-o", "x"], "is not an environment"),
    (["eval", "examples/arithmetic/env.py:ArithmeticEnv", "--env-args", "{bad", "--base-url", "http://x/v1", "-o", "x"],
     "--env-args is not valid JSON"),
    (["rollouts", "/nonexistent"], "not a looprl run directory"),
])
def test_user_errors_exit_2_with_one_line(args, message):
    proc = looprl(*args, check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_monitor_only_components_are_stored_but_not_counted(tmp_path):
    """An env's `reward_weights` of 0 make a component monitor-only; `--reward-weights` overrides the env's."""
    env = tmp_path / "monitored.py"
    env.write_text(
        "from looprl.envs import BaseEnv, Dataset\n"
        "class Monitored(BaseEnv):\n"
        "    max_turns = 1\n"
        "    reward_weights = {'chars': 0.0, 'said_hi': 2.0}\n"
        "    async def create_dataset(self, split, base_dir, *, max_examples=None):\n"
        "        return Dataset([{'prompt_messages': [{'role': 'user', 'content': 'hi'}]}])\n"
        "    async def compute_reward(self, rollout):\n"
        "        text = rollout.messages[-1]['content']\n"
        "        return {'chars': float(len(text)), 'said_hi': float('hi' in text), 'polite': 1.0}\n")
    totals = {}
    for name, extra in (("declared", []), ("overridden", ["--reward-weights", '{"chars": 1}'])):
        with ScriptedServer(lambda b: Reply("hi there")) as server:
            looprl("eval", f"{env}:Monitored", "--base-url", server.base_url, "-n", "1", "-r", "1",
                   "--output", str(tmp_path / name), *extra)
        row = json.loads(looprl("rollouts", str(tmp_path / name), "--json").stdout)
        assert row["rewards"] == {"chars": 8.0, "said_hi": 1.0, "polite": 1.0}
        totals[name] = row["reward"]
    assert totals == {"declared": 3.0, "overridden": 11.0}
