"""benchmax envs through `looprl eval` / `validate` against a scripted server, checked against benchmax's own figures.

`EXPECTED` holds, per example, what benchmax 0.2.5's own `run_group` gives on the scripted replies
(termination reason and reward dict of each rollout, sorted). Where the real benchmax is installed
(the Python 3.12 venv, `make test`), the test obtains them from it and checks looprl against them
through the adapter; on Python 3.11 looprl's compatibility layer must give the same figures.
"""

import asyncio
import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.support.cli import looprl
from tests.support.scripted_server import Reply, ScriptedServer

ENVS = Path(__file__).parent / "envs"
MATH = f"{ENVS}/benchmax_math/env.py:MathToolEnv"
GROUP = f"{ENVS}/benchmax_group/env.py:ShortestAnswerEnv"
UPSTREAM_MATH = f"{ENVS}/benchmax_upstream_math/main.py:MathEnv"
"""benchmax's own math env, vendored unchanged (its UPSTREAM.md): it scores through a `_score_rollout` helper of
its own, a name looprl's runtime once used on `BaseEnv`."""
REAL_BENCHMAX = importlib.util.find_spec("benchmax") is not None


def math_reply(body) -> Reply:
    question = body["messages"][1]["content"]
    tool_results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if "boom" in question:
        return Reply(tool_calls=[("calculator", {"expression": "boom"})])
    if "keep calculating" in question:
        return Reply(tool_calls=[("calculator", {"expression": "1 + 1"})])
    if "ramble" in question:
        return Reply("16 and then some more words", finish_reason="length")
    if "7 * 6" in question:
        return Reply("41")
    if not tool_results:
        return Reply(tool_calls=[("calculator", {"expression": re.search(r"is (.*)\?", question).group(1)})])
    return Reply(tool_results[-1])


ARITHMETIC = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}
UPSTREAM_ARGS = {"long_tool_probability": 0}  # its default pads one tool result in ten, at random


def arithmetic_reply(body) -> Reply:
    """For upstream's math env: the task's operation as a tool call, then its result in <answer> tags; 7 * 6 is
    answered right but without the tool (its reward wants both)."""
    left, op, right = re.search(r"is (\d+) (.) (\d+)\?", body["messages"][1]["content"]).groups()
    tool_results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if (left, op) == ("7", "*"):
        return Reply("<answer>42</answer>")
    if not tool_results:
        return Reply(tool_calls=[(ARITHMETIC[op], {"a": int(left), "b": int(right)})])
    return Reply(f"<answer>{tool_results[-1]}</answer>")


def counting_reply():
    """The n-th request for a prompt gets an answer n characters long, so a group's answers differ."""
    seen: Counter = Counter()

    def reply(body) -> Reply:
        prompt = body["messages"][-1]["content"]
        seen[prompt] += 1
        return Reply("x" * seen[prompt])
    return reply


def outcomes(pairs) -> dict[str, list]:
    """{question: sorted [(termination reason, rewards)]} from (question, reason, rewards) triples."""
    by_question: dict[str, list] = {}
    for question, reason, rewards in pairs:
        by_question.setdefault(question, []).append((reason, dict(sorted(rewards.items()))))
    return {q: sorted(v, key=json.dumps) for q, v in by_question.items()}


CORRECT, WRONG = {"correct": 1.0}, {"correct": 0.0}
EXPECTED_MATH = {
    "What is 2 + 3?": [("finished", CORRECT)] * 2,
    "What is 7 * 6?": [("finished", WRONG)] * 2,
    "What is 9 - 4? (calculator: boom)": [("tool_error", {})] * 2,
    "What is 1 + 1? (keep calculating)": [("tool_budget_exceeded", WRONG)] * 2,
    "What is 8 + 8? (ramble)": [("output_exceeded", WRONG)] * 2,
}
EXPECTED_UPSTREAM = {
    "What is 2 + 3?": [("finished", {"correctness": 1.0})] * 2,
    "What is 7 * 6?": [("finished", {"correctness": 0.0})] * 2,
    "What is 9 - 4?": [("judge_error", {})] * 2,  # its row's sentinels: compute_reward raises RolloutFailure
    "What is 8 / 2?": [("tool_error", {})] * 2,  # run_tool raises
    "What is 3 + 3?": [("judge_error", {})] * 2,  # compute_group_rewards raises RolloutFailure
}
RANKED = [("finished", {"length": 1.0, "shortest": 1.0}), ("finished", {"length": 2.0, "shortest": 0.0})]
EXPECTED_REASONS = {"finished", "output_exceeded", "max_turns_exceeded", "tool_budget_exceeded", "tool_error"}
QUESTIONS = ["Name a colour.", "Name an animal.", "Name a city."]
CASES = {
    "math": (MATH, {}, math_reply, EXPECTED_MATH),
    "math max_turns=2": (MATH, {"max_turns": 2}, math_reply, {
        **EXPECTED_MATH, "What is 1 + 1? (keep calculating)": [("max_turns_exceeded", CORRECT)] * 2}),
    "upstream math": (UPSTREAM_MATH, UPSTREAM_ARGS, arithmetic_reply, EXPECTED_UPSTREAM),
    "group": (GROUP, {}, counting_reply, dict.fromkeys(QUESTIONS, RANKED)),
    "group misaligned": (GROUP, {"mode": "misaligned"}, counting_reply,
                         dict.fromkeys(QUESTIONS, [("group_reward_error", {})] * 2)),
    "group duplicate key": (GROUP, {"mode": "duplicate"}, counting_reply,
                            dict.fromkeys(QUESTIONS, [("group_reward_error", {})] * 2)),
}


def question_of(messages) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def looprl_eval(tmp_path, spec, env_args, reply, n) -> tuple[dict[str, list], Path]:
    out = tmp_path / "run"
    with ScriptedServer(reply() if reply is counting_reply else reply) as server:
        looprl("eval", spec, "--env-args", json.dumps(env_args), "--base-url", server.base_url, "-n", str(n),
               "-r", "2", "--split", "train", "--output", str(out))
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    return outcomes((question_of(r["messages"]), r["termination_reason"], r["rewards"]) for r in rows), out


def benchmax_run_group(spec, env_args, reply, n) -> dict[str, list]:
    """The figures benchmax's own `run_group` gives, two rollouts per example, against the scripted server."""
    from benchmax.envs import RolloutRequest, StaticBearerAuth

    from looprl.envserver.loading import default_base_dir

    path, name = spec.rsplit(":", 1)
    module_spec = importlib.util.spec_from_file_location(f"bm_{Path(path).parent.name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    env = getattr(module, name)(**env_args)

    async def run(base_url: str) -> list:
        dataset = await env.create_dataset("train", default_base_dir(spec), max_examples=n)
        triples = []
        for example in dataset:
            requests = [RolloutRequest(rollout_id=f"{example.id}-{i}", example=example, model="scripted",
                                       base_url=base_url, model_auth=StaticBearerAuth("x")) for i in range(2)]
            results = await env.run_group(requests)
            question = question_of(example.payload["prompt_messages"])
            triples += [(question, o.termination_reason, dict(o.rewards)) for o in results.values()]
        return triples

    with ScriptedServer(reply() if reply is counting_reply else reply) as server:
        return outcomes(asyncio.run(run(server.base_url)))


@pytest.mark.parametrize("case", CASES)
def test_looprl_eval_gives_benchmax_figures(tmp_path, case):
    spec, env_args, reply, expected = CASES[case]
    if REAL_BENCHMAX:
        assert benchmax_run_group(spec, env_args, reply, len(expected)) == expected
    figures, out = looprl_eval(tmp_path, spec, env_args, reply, len(expected))
    assert figures == expected
    worker_log = next((out / "logs" / "envs" / "train").glob("*/env_worker_0.log")).read_text()
    assert ("compatibility layer" in worker_log) != REAL_BENCHMAX


def test_benchmax_logs_land_on_their_rollouts(tmp_path):
    _, out = looprl_eval(tmp_path, MATH, {}, math_reply, 3)
    rows = {r["rollout_id"]: question_of(r["messages"])
            for r in map(json.loads, looprl("rollouts", str(out), "--json").stdout.splitlines())}
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    calculator = [rec for rec in logs if rec["message"].startswith("calculator(")]
    assert {rows[rec["rollout_id"]] for rec in calculator} == {"What is 2 + 3?", "What is 9 - 4? (calculator: boom)"}
    assert all(rec["message"] == "calculator(2 + 3)" for rec in calculator if "2 + 3" in rows[rec["rollout_id"]])
    scored = {rec["rollout_id"] for rec in logs if rec["message"].startswith("answer ")}
    assert len(scored) == 4  # the four finished rollouts, each with its own record; the tool errors have none


def test_upstream_math_env_logs_land_on_their_rollouts(tmp_path):
    _, out = looprl_eval(tmp_path, UPSTREAM_MATH, UPSTREAM_ARGS, arithmetic_reply, 2)
    rows = {r["rollout_id"]: (question_of(r["messages"]), r["rewards"])
            for r in map(json.loads, looprl("rollouts", str(out), "--json").stdout.splitlines())}
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    rewards = {rec["rollout_id"]: rec["message"] for rec in logs if rec["message"].startswith("[reward]")}
    assert rewards == {rid: f"[reward] correctness={rewards_['correctness']}" for rid, (_, rewards_) in rows.items()}
    tools = {rows[rec["rollout_id"]][0] for rec in logs if rec["message"].startswith("[tool] add(")}
    assert tools == {"What is 2 + 3?"}


def test_benchmax_group_records_reach_every_rollout(tmp_path):
    _, out = looprl_eval(tmp_path, GROUP, {}, counting_reply, 1)
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    assert len({rec["rollout_id"] for rec in logs if rec["message"] == "group answer lengths [1, 2]"}) == 2


@pytest.mark.parametrize("spec", [MATH, GROUP, UPSTREAM_MATH])
def test_benchmax_envs_validate(spec):
    reply = {MATH: math_reply, GROUP: counting_reply(), UPSTREAM_MATH: arithmetic_reply}[spec]
    env_args = UPSTREAM_ARGS if spec == UPSTREAM_MATH else {}
    with ScriptedServer(reply) as server:
        proc = looprl("validate", spec, "--env-args", json.dumps(env_args), "--base-url", server.base_url)
    assert proc.stdout.rstrip().endswith("OK")


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the engine needs torch (not in the 3.12 venv)")
def test_eval_of_a_benchmax_env_on_the_bundled_model(tmp_path):
    out = tmp_path / "run"
    looprl("eval", MATH, "--env-args", '{"max_turns": 2}', "-n", "2", "-r", "2", "--max-tokens", "24",
           "--split", "train", "--output", str(out))
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    assert len(rows) == 4 and all(r["termination_reason"] in EXPECTED_REASONS for r in rows), rows
    assert all("correct" in r["rewards"] for r in rows if r["termination_reason"] == "finished")
