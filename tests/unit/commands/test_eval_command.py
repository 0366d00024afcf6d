"""`looprl eval`: every user error is one line and exit 2 before the engine starts; the engine's
start is announced; progress moves as groups finish; totals use `--reward-weights`."""

import json
import re
import sqlite3

import pytest
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.cli import main

ENV = "examples/arithmetic/env.py:ArithmeticEnv"


def solve(body) -> Reply:
    """Right on additions, wrong on subtractions."""
    a, op, b = re.search(r"(\d+) ([-+]) (\d+)", body["messages"][-1]["content"]).groups()
    return Reply(f"<answer>{int(a) + int(b) if op == '+' else 0}</answer>")


def one_line_error(capsys, argv: list[str]) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("flags,message", [
    (["-n", "0"], "-n/--num-examples must be at least 1"),
    (["-r", "0"], "-r/--rollouts-per-example must be at least 1"),
    (["--temperature", "-1"], "--temperature must be at least 0"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--top-p", "1.5"], "--top-p must be at most 1"),
    (["--reward-weights", "[1]"], "--reward-weights must be a JSON object of numbers"),
])
def test_bad_numbers_are_one_line_before_the_engine(flags, message, engine, tmp_path, capsys):
    err = one_line_error(capsys, ["eval", ENV, "-o", str(tmp_path / "run"), *flags])
    assert err.startswith(f"looprl eval: error: {message}") and not engine.started


def test_a_malformed_jsonl_line_is_named_before_the_engine(engine, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    row = json.dumps({"prompt_messages": [{"role": "user", "content": "1 + 1"}], "answer": 2})
    (data / "eval.jsonl").write_text(f"{row}\n{{not json\n")
    err = one_line_error(capsys, ["eval", ENV, "--base-dir", str(data), "-o", str(tmp_path / "run")])
    assert f"{data / 'eval.jsonl'}:2: invalid JSON" in err and not engine.started


def test_an_output_holding_a_run_is_refused_before_the_engine_and_left_alone(engine, tmp_path, capsys):
    out = tmp_path / "run"
    (out / "logs").mkdir(parents=True)
    (out / "looprl.db").write_bytes(b"old run")
    (out / "logs" / "inference.log").write_text("old engine\n")
    err = one_line_error(capsys, ["eval", ENV, "-o", str(out)])
    assert "--overwrite" in err and not engine.started
    assert (out / "logs" / "inference.log").read_text() == "old engine\n"
    assert (out / "looprl.db").read_bytes() == b"old run"


def test_eval_announces_the_engine_and_reports_progress_when_piped(engine, tmp_path, capsys):
    out = tmp_path / "run"
    with ScriptedServer(solve) as server:
        engine.base_url = server.base_url
        assert main(["eval", ENV, "--split", "train", "-n", "3", "-r", "2", "-o", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "starting engine smollm2-135m-instruct (embedded)…" in stdout
    assert re.search(r"engine ready in \d+\.\d+s", stdout)
    assert stdout.index("engine ready") < stdout.index("rollouts: 0/6 done")
    assert re.search(r"rollouts · mean reward \d\.\d{3}: 6/6 done", stdout)
    assert engine.started == [out / "logs" / "inference.log"]


def test_eval_totals_use_reward_weights(tmp_path, capsys):
    out = tmp_path / "run"
    with ScriptedServer(solve) as server:
        assert main(["eval", ENV, "--base-url", server.base_url, "--split", "train", "-n", "4", "-r", "1",
                     "--reward-weights", '{"correct": 2, "format": 0}', "-o", str(out)]) == 0
    with sqlite3.connect(out / "looprl.db") as db:
        rows = [(json.loads(rewards), reward) for rewards, reward in db.execute("SELECT rewards, reward FROM rollouts")]
        summary = json.loads(db.execute("SELECT summary FROM runs").fetchone()[0])
    assert len(rows) == 4 and all(reward == 2 * rewards["correct"] for rewards, reward in rows)
    assert summary["rewards"]["reward"] == pytest.approx(sum(r for _, r in rows) / 4)


def test_eval_logs_its_results_to_a_tracker(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    with ScriptedServer(solve) as server:
        assert main(["eval", ENV, "--base-url", server.base_url, "--api-key", "secret", "--split", "train",
                     "-n", "2", "-r", "1", "--tracker", "tensorboard", "-o", str(out)]) == 0
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    assert [e.value for e in events.Scalars("eval/rollouts")] == [2.0]
    assert "eval/reward" in events.Tags()["scalars"]
    config = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert '"rollouts_per_example": 1' in config and "secret" not in config
