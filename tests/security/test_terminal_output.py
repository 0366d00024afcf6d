"""#34 item 11: model and env text cannot drive the user's terminal.

A reply, a tool result, a log record, a reward name or an env's error holding escape sequences
(`ESC ] 0 ; title BEL` renames the window, `ESC [ 2 J` clears the screen, CR overwrites the line,
`0x9b` is an 8-bit CSI) is printed by every command with those characters escaped, and `[bold]` in it
prints as written instead of styling: no raw ESC, BEL, CR or C1 byte reaches the terminal.
"""

import io
import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from looprl.cli import main
from looprl.commands.eval.summary import print_summary
from looprl.commands.replay.command import _outcome, _transcript_diff
from looprl.commands.validate.command import Checks
from looprl.envs.types import LogRecordData, RolloutResult
from looprl.errors import UserError
from looprl.launch.progress import RunProgress
from looprl.launch.supervisor import tail
from looprl.paths import log_path
from looprl.store.records import RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter
from looprl.utils.terminal import markup_safe, printable

EVIL = "pwn\x1b]0;pwned\x07 \x1b[2J\rover [bold]styled[/bold] \x9b31m\u202eend"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")
ROOT = Path(__file__).resolve().parents[2]
ENV = "examples/arithmetic/env.py:ArithmeticEnv"


def assert_inert(out: str) -> None:
    for char in RAW:
        assert char not in out, f"{char!r} reached the terminal:\n{out!r}"
    assert "\\x1b]0;pwned\\x07" in out  # shown, escaped


def assert_unstyled(out: str) -> None:
    assert "[bold]" in out  # rich did not take it as markup


@pytest.fixture
def run_dir(tmp_path):
    """An eval run whose env and model wrote EVIL everywhere they can."""
    run = tmp_path / "evil"
    writer = RunStoreWriter(run)
    writer.start_run(RunInfo(run_id="run", kind="eval", env=str(ROOT / ENV), env_name=EVIL, model=EVIL,
                             created_at=time.time()))
    now = time.time()
    log = LogRecordData(time=now, level=30, level_name="WARNING", logger=EVIL, message=EVIL, exception=EVIL)
    messages = [{"role": "user", "content": "What is 2 + 2?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": EVIL, "arguments": EVIL}}]},
                {"role": "tool", "tool_call_id": EVIL, "name": EVIL, "content": EVIL},
                {"role": "assistant", "content": EVIL}]
    scored = RolloutResult(rollout_id="r0", group_id="g0", example_id=EVIL, split="eval", messages=messages,
                           example_args={"answer": "4"}, termination_reason="finished", rewards={EVIL: 1.0},
                           started_at=now, finished_at=now + 1, logs=[log])
    failed = scored.model_copy(update={"rollout_id": "r1", "termination_reason": EVIL, "error": EVIL, "rewards": {}})
    writer.write_rollouts([RolloutRecord.from_result(scored, run_id="run", env_name=EVIL, step=0, reward=1.0,
                                                     advantage=None, model_calls=[]),
                           RolloutRecord.from_result(failed, run_id="run", env_name=EVIL, step=0, reward=None,
                                                     advantage=None, model_calls=[])])
    writer.write_step("run", 1, {"reward": 1.0, EVIL: EVIL})
    writer.close()
    return run


@pytest.mark.parametrize("argv", [["rollouts"], ["rollouts", "--rollout", "r0"], ["rollouts", "--rollout", "r1"],
                                  ["logs"], ["logs", "--rollout", "r0"], ["metrics"], ["metrics", "--all"]])
def test_reading_commands(run_dir, capsys, argv):
    assert main([argv[0], str(run_dir), *argv[1:]]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert_unstyled(out)


def test_json_output_stays_json(run_dir, capsys):
    assert main(["rollouts", str(run_dir), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["messages"][-1]["content"] == EVIL  # the data as stored; JSON escapes the controls itself


def test_rescore(run_dir, capsys):
    assert main(["rescore", str(run_dir), "--log-level", "DEBUG"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert_unstyled(out)
    assert "not re-scored (failed before scoring): pwn" in out


def test_replay_diff_and_outcome():
    console = Console(file=io.StringIO(), highlight=False, soft_wrap=True)
    stored = RolloutRecord(rollout_id="r0", group_id="g", example_id="e", split="eval", run_id="run", env_name="E",
                           messages=[{"role": "assistant", "content": "4"}], termination_reason="finished",
                           rewards={EVIL: 1.0}, reward=1.0, started_at=0, finished_at=1)
    new = RolloutResult(rollout_id="r0", group_id="g", example_id="e", split="eval",
                        messages=[{"role": "assistant", "content": EVIL}], termination_reason=EVIL, error=EVIL,
                        rewards={EVIL: 0.0}, started_at=0, finished_at=1)
    _transcript_diff(console, stored.messages, new.messages)
    _outcome(console, stored, new, {})
    out = console.file.getvalue()
    assert_inert(out)
    assert_unstyled(out)


def test_eval_summary_and_validate(capsys):
    console = Console(file=io.StringIO(), highlight=False)
    print_summary({"rewards": {f"reward/{EVIL}": 1.0, "reward": 1.0}, "termination_reasons": {EVIL: 1},
                   "rollouts": 1, "scored": 1, "failed": 0, "prompt_tokens": 1, "completion_tokens": 1,
                   "wall_s": 1.0, "rollouts_per_s": 1.0}, console)
    assert_inert(console.file.getvalue())
    assert_unstyled(console.file.getvalue())
    Checks().report("one group of 2 rollouts runs and is scored", [f"rollout r0: {EVIL}"])
    assert_inert(capsys.readouterr().out)


def test_rl_progress_warnings(tmp_path):
    writer = RunStoreWriter(tmp_path)
    writer.start_run(RunInfo(run_id="run", kind="rl", env="x.py:E", env_name="E", model="m", created_at=time.time()))
    out = io.StringIO()
    progress = RunProgress(tmp_path, max_steps=1, out=out)
    progress.follow()
    log = log_path(tmp_path, "orchestrator")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"2025-01-01 12:00:00.000 | WARNING  | looprl.session:1 | env said {EVIL}\n"
                   + json.dumps({"level": "WARNING", "message": f"as json {EVIL}"}) + "\n")
    progress.poll()
    writer.close()
    printed = out.getvalue()
    assert_inert(printed)
    assert "env said pwn" in printed and "as json pwn" in printed


def test_rl_prints_a_failed_process_log_tail_escaped(tmp_path):
    """`looprl rl` prints the last lines of a process that failed: an env's output may be among them."""
    log = tmp_path / "orchestrator.log"
    log.write_text(f"started\nenv printed {EVIL}\n")
    shown = tail(log)
    assert shown.startswith("started\nenv printed pwn")
    assert_inert(shown)


def test_a_command_error(monkeypatch, capsys):
    import looprl.commands.logs as logs

    def fail(args):
        raise UserError(f"env failed: {EVIL}")

    monkeypatch.setattr(logs, "run", fail)
    assert main(["logs", "somewhere"]) == 2
    assert_inert(capsys.readouterr().err)


def test_the_helper():
    assert printable("a\nb\tc\rd\x1be\x00f\x7fg\x85") == "a\nb\tc\\rd\\x1be\\x00f\\x7fg\\x85"
    assert printable("a\nb\tc", lines=False) == "a\\nb\\tc"
    assert printable("plain text · ünïcode ✓") == "plain text · ünïcode ✓"
    assert markup_safe("[red]x[/red]\x1b") == "\\[red]x\\[/red]\\x1b"
