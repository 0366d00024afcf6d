"""A verifiers 0.4 env package (`envs/verifiers_v1/add_tool_v1`, scaffolded by `vf-init -T`: two rewards, a metric,
a stop condition, a task-scoped MCP tool server), installed as its README says, through `looprl eval` and
`validate` against a scripted server, checked against the figures verifiers' own `vf-eval` gives on the same
replies: per task, each rollout's termination reason, reward components and total must be the same.

The harness is verifiers' `null` harness in the `subprocess` runtime (looprl's local defaults; vf-eval is given
them as flags): a `uv` script that calls the model with `stream: true`, so the scripted server and looprl's
gateway both stream. The first run syncs the harness script's dependencies into uv's cache (network).
"""

import json
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from tests.support.cli import looprl
from tests.support.scripted_server import Reply, ScriptedServer
from tests.support.verifiers_line import require_v1

vf = require_v1()

from looprl.interop.verifiers.v1_results import components, termination  # noqa: E402

PACKAGE = Path(__file__).parent / "envs" / "verifiers_v1" / "add_tool_v1"
BIN = Path(sys.executable).parent
ENV_ID = "add-tool-v1"
VF_LOCAL = ["--env.agent.runtime.type", "subprocess", "--env.agent.harness.id", "null"]


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """The env package installed as its README says (`uv pip install`), into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([str(BIN / "uv"), "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(PACKAGE)],
                   check=True, timeout=600, env={**os.environ, "VIRTUAL_ENV": str(BIN.parent)})
    return target


def put_on_path(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed package importable here and in every process the CLI starts."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(installed), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(installed))


@pytest.fixture(autouse=True)
def _on_path(installed, monkeypatch):
    put_on_path(installed, monkeypatch)


@pytest.fixture(scope="module")
def add_run(installed, tmp_path_factory) -> tuple[dict[str, list], Path]:
    """`looprl eval` of the four tasks on `add_reply`, two rollouts each: one run read by every test that only
    reads a run (the store is opened read-only by `rollouts`, `logs`, `rescore` and `replay`)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        put_on_path(installed, monkeypatch)
        return looprl_eval(tmp_path_factory.mktemp("add-run"), add_reply, 4)


def add_reply(body) -> Reply:
    """Calls the tool, then answers; -1 + 4 answered at once; 20 + 22 calls the tool for ever; 5 + 5 cut at length."""
    a, b = map(int, re.search(r"What is (-?\d+) \+ (-?\d+)", body["messages"][0]["content"]).groups())
    if a == 5:
        return Reply("1", finish_reason="length")
    if a == -1:
        return Reply(str(a + b))
    if a == 20 or not any(m["role"] == "tool" for m in body["messages"]):
        return Reply(tool_calls=[("add_tool_add", {"a": a, "b": b})])
    return Reply(str(a + b))


def refusing_reply(body) -> Reply:
    """The provider refuses -1 + 4 (a 400: not retried); the rest as `add_reply`."""
    if "What is -1 + 4" in body["messages"][0]["content"]:
        return Reply(status=400, error={"message": "scripted refusal", "type": "invalid_request_error", "code": None})
    return add_reply(body)


def question(messages) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def figures(triples) -> dict[str, list]:
    by_question: dict[str, list] = {}
    for q, reason, rewards, total in triples:
        by_question.setdefault(q, []).append((reason, dict(sorted(rewards.items())), round(total, 6)))
    return {q: sorted(v, key=json.dumps) for q, v in by_question.items()}


def scored(reason: str) -> bool:
    return reason in {"finished", "output_exceeded", "context_exceeded", "max_turns_exceeded"}


def vf_eval(tmp_path, reply, n: int, agent_flags=(), rollouts: int = 2) -> dict[str, list]:
    """verifiers' own figures: `vf-eval` with `rollouts` per task, its traces mapped by looprl's table."""
    from verifiers.v1.utils.trace_store import read_episodes

    out = tmp_path / "vf-eval"
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ["PATH"]])}
    with ScriptedServer(reply) as server:
        proc = subprocess.run(
            [str(BIN / "vf-eval"), ENV_ID, "-n", str(n), "-r", str(rollouts), "--model", "scripted",
             "--client.base-url", server.base_url, "--client.api-key-var", "LOOPRL_TEST_NO_KEY", *VF_LOCAL,
             *agent_flags, "--no-push", "--no-rich", "--output-dir", str(out), "--run.name", "reference"],
            capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    triples = []
    for episode in read_episodes(out / "reference", vf.WireTrace):
        trace = episode.traces[-1]
        reason, _ = termination(trace)
        triples.append((trace.task.data.prompt, reason, components(trace) if scored(reason) else {},
                        trace.reward if scored(reason) else 0.0))
    return figures(triples)


def looprl_eval(tmp_path, reply, n: int, env_args=None, split="train",
                rollouts: int = 2) -> tuple[dict[str, list], Path]:
    out = tmp_path / "looprl"
    with ScriptedServer(reply) as server:
        looprl("eval", f"vf:{ENV_ID}", "--env-args", json.dumps(env_args or {}), "--base-url", server.base_url,
               "-n", str(n), "-r", str(rollouts), "--split", split, "--output", str(out))
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    return figures((question(r["messages"]), r["termination_reason"], r["rewards"], r["reward"] or 0.0)
                   for r in rows), out


Q = "What is {} + {}? Use the add_tool_add tool."
EXPECTED = {  # each task's rollouts: (termination reason, reward components, total)
    Q.format(2, 3): ("finished", {"correct": 1.0, "reply_chars": 1.0, "used_tool": 1.0}, 1.5),
    Q.format(-1, 4): ("finished", {"correct": 1.0, "reply_chars": 1.0, "used_tool": 0.0}, 1.0),
    Q.format(20, 22): ("finished", {"correct": 0.0, "reply_chars": 0.0, "used_tool": 1.0}, 0.5),  # @vf.stop
    Q.format(5, 5): ("output_exceeded", {"correct": 0.0, "reply_chars": 1.0, "used_tool": 0.0}, 0.0),
}
MAX_TURNS_2 = {**EXPECTED, Q.format(20, 22): ("max_turns_exceeded", {"correct": 0.0, "reply_chars": 0.0,
                                                                     "used_tool": 1.0}, 0.5)}
REFUSED = {**EXPECTED, Q.format(-1, 4): ("model_error", {}, 0.0)}
CASES = {
    "defaults": (add_reply, {}, (), EXPECTED),
    "agent override": (add_reply, {"agent": {"max_turns": 2}}, ("--env.agent.max-turns", "2"), MAX_TURNS_2),
    "provider error": (refusing_reply, {}, (), REFUSED),
}


@pytest.mark.parametrize("case", CASES)
def test_looprl_eval_gives_vf_eval_figures(tmp_path, case, add_run):
    """The shared run has two rollouts a task; the other cases one (each rollout starts its harness and tool server
    processes, the cost of these tests)."""
    reply, env_args, agent_flags, expected = CASES[case]
    rollouts = 2 if case == "defaults" else 1
    expected = {q: [outcome] * rollouts for q, outcome in expected.items()}
    assert vf_eval(tmp_path, reply, 4, agent_flags, rollouts) == expected
    ours = add_run[0] if case == "defaults" else looprl_eval(tmp_path, reply, 4, env_args, rollouts=rollouts)[0]
    assert ours == expected


def test_records_tool_calls_and_model_calls_land_on_their_rollouts(add_run):
    _, out = add_run
    rows = {r["rollout_id"]: r for r in map(json.loads, looprl("rollouts", str(out), "--json").stdout.splitlines())}
    logs = [json.loads(line) for line in looprl("logs", str(out), "--json").stdout.splitlines()]
    looked = [rec for rec in logs if rec["message"].startswith("correct looks at")]
    assert len(looked) == 8 and len({rec["rollout_id"] for rec in looked}) == 8
    for rec in looked:  # the reward's record names the rollout's own question's answer
        asked = question(rows[rec["rollout_id"]]["messages"])
        a, b = map(int, re.search(r"What is (-?\d+) \+ (-?\d+)", asked).groups())
        assert rec["message"].endswith(f"(answer {a + b})")
    two_three = [r for r in rows.values() if question(r["messages"]) == Q.format(2, 3)]
    for r in two_three:
        assert [m["role"] for m in r["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert r["messages"][1]["tool_calls"][0]["function"]["name"] == "add_tool_add"
        assert r["messages"][2]["content"] == "5" and (r["turns"], r["tool_calls"]) == (2, 1)
    with closing(sqlite3.connect(out / "looprl.db")) as db:
        calls = db.execute("SELECT rollout_id, status, prompt_token_ids, completion_token_ids "
                           "FROM model_calls").fetchall()
    per_rollout = {rid: sum(1 for c in calls if c[0] == rid) for rid in rows}
    assert all(per_rollout[rid] >= rows[rid]["turns"] >= 1 for rid in rows)
    assert all(status == 200 and prompt and completion for _, status, prompt, completion in calls)


def test_split_reaches_the_taskset_split_field(tmp_path):
    got, _ = looprl_eval(tmp_path, add_reply, 2, split="eval", rollouts=1)
    assert set(got) == {Q.format(7, 8), Q.format(1, 1)}


def test_validate_a_v1_env():
    with ScriptedServer(add_reply) as server:
        proc = looprl("validate", f"vf:{ENV_ID}", "--base-url", server.base_url)
    assert proc.stdout.rstrip().endswith("OK"), proc.stdout


def test_bad_env_args_name_the_key():
    proc = looprl("validate", f"vf:{ENV_ID}", "--env-args", json.dumps({"num_taks": 2}), check=False)
    assert proc.returncode != 0 and "num_taks" in proc.stderr, proc.stderr


def test_rescore_runs_the_tasks_own_scoring_on_the_stored_traces(tmp_path, monkeypatch, add_run):
    _, out = add_run
    same = [json.loads(line) for line in looprl("rescore", str(out), "--json").stdout.splitlines()]
    assert len(same) == 8 and all(r["rescored"] and not r["changed"] for r in same)
    assert all(any(rec["message"].startswith("correct looks at") for rec in r["logs"]) for r in same)
    edited = tmp_path / "edited"  # the reward edited: half marks, and a metric that raises on 20 + 22
    edited_src = edited / "add_tool_v1" / "taskset.py"
    subprocess.run(["cp", "-r", str(PACKAGE), str(edited)], check=True)
    code = edited_src.read_text()
    code = code.replace("return float(reply == str(self.data.answer))", "return 0.5 * (reply == str(self.data.answer))")
    code = code.replace("return float(len(trace.last_reply))",
                        "assert self.data.a != 20, 'no reply to measure'\n        return float(len(trace.last_reply))")
    edited_src.write_text(code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(edited), os.environ["PYTHONPATH"]]))
    after = {r["rollout_id"]: r for r in map(json.loads, looprl("rescore", str(out), "--json").stdout.splitlines())}
    questions = {r["rollout_id"]: question(r["messages"])
                 for r in map(json.loads, looprl("rollouts", str(out), "--json").stdout.splitlines())}
    for rid, r in after.items():
        q = questions[rid]
        if q == Q.format(20, 22):
            assert r["after"]["termination_reason"] == "reward_error" and "no reply to measure" in r["after"]["error"]
        elif q in (Q.format(2, 3), Q.format(-1, 4)):
            assert r["changed"] and r["after"]["rewards"]["correct"] == 0.5
        else:
            assert not r["changed"]
    summary = looprl("rescore", str(out)).stdout
    assert "now failing: reward_error 2" in summary


def test_replay_runs_a_stored_rollout_again_on_its_recorded_replies(add_run):
    _, out = add_run
    rollout = next(r for r in map(json.loads, looprl("rollouts", str(out), "--json").stdout.splitlines())
                   if question(r["messages"]) == Q.format(2, 3))  # a tool call, its result, the answer
    text = looprl("replay", str(out), rollout["rollout_id"]).stdout
    assert "transcript: the same as the stored one (4 messages)" in text and "ended: finished" in text, text
    assert "diverged" not in text  # the harness's requests are the recorded calls, message for message
    assert re.search(r"total\s+│\s+1\.500\s+│\s+1\.500", text), text
    assert "correct looks at '5' (answer 5)" in text
