"""verifiers envs (`vf:ENV_ID`) through `looprl eval` / `validate` against a scripted server, checked against
the figures verifiers' own `run_group` gives on the same replies (needs verifiers: the 3.12 venv, `make test312`).

Per example, each rollout's termination reason, reward components (verifiers' metrics) and total (verifiers'
`state["reward"]`) must be the same: looprl's stored total honours the rubric's weights, zero-weight
metrics (`num_turns`, `answer_chars`) stored and shown but not counted.
"""

import asyncio
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.support.cli import looprl
from tests.support.scripted_server import Reply, ScriptedServer
from tests.support.verifiers_line import require_classic

vf = require_classic()
ENVS = Path(__file__).parent / "envs" / "verifiers"


@pytest.fixture(autouse=True)
def _env_packages_importable(monkeypatch):
    """The test env packages import as installed ones would (the CLI's subprocesses inherit the path)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ENVS), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(ENVS))


def reverse_reply(body) -> Reply:
    word = re.search(r"word: (\w+)", body["messages"][-1]["content"]).group(1)
    if word == "drawer":
        return Reply("rew", finish_reason="length")
    return Reply({"looprl": "lrpxxl", "boom": "boom"}.get(word, word[::-1]))


def add_reply(body) -> Reply:
    a, b = map(int, re.search(r"What is (-?\d+) \+ (-?\d+)", body["messages"][0]["content"]).groups())
    tool_results = [m for m in body["messages"] if m["role"] == "tool"]
    if a == 20 or not tool_results:
        return Reply(tool_calls=[("add", {"a": a, "b": b})])
    return Reply(str(a + b))


def counting_reply():
    seen: Counter = Counter()

    def reply(body) -> Reply:
        seen[body["messages"][-1]["content"]] += 1
        return Reply("x" * seen[body["messages"][-1]["content"]])
    return reply


def figures(triples) -> dict[str, list]:
    by_question: dict[str, list] = {}
    for question, reason, rewards, total in triples:
        by_question.setdefault(question, []).append((reason, dict(sorted(rewards.items())), round(total, 6)))
    return {q: sorted(v, key=json.dumps) for q, v in by_question.items()}


def question_of(messages) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


REVERSE = {
    "Reverse the word: stressed": [("finished", {"answer_chars": 8.0, "exact": 1.0, "num_turns": 1.0, "overlap": 1.0,
                                                 "picky": 1.0}, 1.75)] * 2,
    "Reverse the word: drawer": [("output_exceeded", {"answer_chars": 3.0, "exact": 0.0, "num_turns": 1.0,
                                                      "overlap": 0.5, "picky": 1.0}, 0.5)] * 2,
    "Reverse the word: boom": [("finished", {"answer_chars": 4.0, "exact": 0.0, "num_turns": 1.0, "overlap": 0.5,
                                             "picky": 0.0}, 0.25)] * 2,
    "Reverse the word: looprl": [("finished", {"answer_chars": 6.0, "exact": 0.0, "num_turns": 1.0,
                                               "overlap": 4 / 6, "picky": 1.0}, round(4 / 12 + 0.25, 6))] * 2,
}
TOOL = {"What is 2 + 3? Use the add tool.": [("finished", {"add_calls": 1.0, "correct": 1.0, "num_turns": 2.0,
                                                           "total_tool_calls": 1.0}, 1.0)] * 2,
        "What is -1 + 4? Use the add tool.": [("finished", {"add_calls": 1.0, "correct": 1.0, "num_turns": 2.0,
                                                            "total_tool_calls": 1.0}, 1.0)] * 2,
        "What is 20 + 22? Use the add tool.": [("max_turns_exceeded", {"add_calls": 3.0, "correct": 0.0,
                                                                       "num_turns": 3.0, "total_tool_calls": 3.0},
                                                0.0)] * 2}
RANKED = [("finished", {"num_turns": 1.0, "said_something": 1.0, "shortest": 0.0}, 1.0),
          ("finished", {"num_turns": 1.0, "said_something": 1.0, "shortest": 1.0}, 3.0)]
GROUP = {question: RANKED for question in ["Name a colour.", "Name an animal."]}
CASES = {
    "single-turn": ("vf-reverse-words", {}, reverse_reply, REVERSE),
    "tool": ("vf_tool_add", {}, add_reply, TOOL),
    "tool strict": ("vf_tool_add", {"strict": True}, add_reply, {
        **TOOL, "What is -1 + 4? Use the add tool.": [("tool_error", {}, 0.0)] * 2}),
    "group reward": ("vf_group_rank", {}, counting_reply, GROUP),
}


def verifiers_run_group(env_id, env_args, reply) -> dict[str, list]:
    """verifiers' own figures: `run_group` of two rollouts per example, its stop conditions mapped by looprl."""
    from openai import AsyncOpenAI
    from verifiers.clients import OpenAIChatCompletionsClient

    from looprl.interop.verifiers.classic import termination

    env = vf.load_environment(env_id, **env_args)

    async def run(base_url: str) -> list:
        client = OpenAIChatCompletionsClient(AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0))
        triples = []
        for row in env.get_dataset().to_list():
            for out in await env.run_group([row, row], client, "scripted", {}):
                reason, _ = termination(out, env.max_turns)
                scored = reason not in {"tool_error", "model_error", "env_error", "timeout"}
                triples.append((question_of(row["prompt"]), reason, out["metrics"] if scored else {},
                                out["reward"] if scored else 0.0))
        return triples

    with ScriptedServer(reply() if reply is counting_reply else reply) as server:
        return figures(asyncio.run(run(server.base_url)))


def looprl_eval(tmp_path, env_id, env_args, reply, n) -> tuple[dict[str, list], Path]:
    out = tmp_path / "run"
    with ScriptedServer(reply() if reply is counting_reply else reply) as server:
        looprl("eval", f"vf:{env_id}", "--env-args", json.dumps(env_args), "--base-url", server.base_url,
               "-n", str(n), "-r", "2", "--split", "train", "--output", str(out))
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    return figures((question_of(r["messages"]), r["termination_reason"], r["rewards"], r["reward"] or 0.0)
                   for r in rows), out


@pytest.mark.parametrize("case", CASES)
def test_looprl_eval_gives_verifiers_figures(tmp_path, case):
    env_id, env_args, reply, expected = CASES[case]
    assert verifiers_run_group(env_id, env_args, reply) == expected
    assert looprl_eval(tmp_path, env_id, env_args, reply, len(expected))[0] == expected


def test_verifiers_records_land_on_their_rollouts(tmp_path):
    _, out = looprl_eval(tmp_path, "vf-reverse-words", {}, reverse_reply, 4)
    rows = {r["rollout_id"]: question_of(r["messages"])
            for r in map(json.loads, looprl("rollouts", str(out), "--json").stdout.splitlines())}
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    swallowed = [rec for rec in logs if "Error calling reward function picky" in rec["message"]]
    assert len(swallowed) == 2 and all(rec["level"] in ("ERROR", 40) for rec in swallowed)
    assert {rows[rec["rollout_id"]] for rec in swallowed} == {"Reverse the word: boom"}
    assert len({rec["rollout_id"] for rec in logs if rec["message"].startswith("picky looks at")}) == 8


def test_verifiers_tool_records_land_on_their_rollouts(tmp_path):
    _, out = looprl_eval(tmp_path, "vf_tool_add", {}, add_reply, 1)
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    assert len({rec["rollout_id"] for rec in logs if rec["message"] == "add(2, 3)"}) == 2


@pytest.mark.parametrize("env_id", ["vf-reverse-words", "vf_tool_add"])
def test_verifiers_envs_validate(env_id):
    with ScriptedServer(reverse_reply if env_id == "vf-reverse-words" else add_reply) as server:
        proc = looprl("validate", f"vf:{env_id}", "--base-url", server.base_url)
    assert proc.stdout.rstrip().endswith("OK"), proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the engine needs torch (not in the 3.12 venv)")
def test_eval_of_a_verifiers_env_on_the_bundled_model(tmp_path):
    out = tmp_path / "run"
    looprl("eval", "vf:vf-reverse-words", "-n", "2", "-r", "2", "--max-tokens", "16", "--split", "train",
           "--output", str(out))
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    weights = {"exact": 1.0, "overlap": 0.5, "answer_chars": 0.0, "picky": 0.25, "num_turns": 0.0}
    assert len(rows) == 4 and {r["termination_reason"] for r in rows} <= {"finished", "output_exceeded"}
    assert all(r["reward"] == pytest.approx(sum(weights[k] * v for k, v in r["rewards"].items())) for r in rows)
