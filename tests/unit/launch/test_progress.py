"""`looprl rl`'s progress output, piped: a line per step from the run store, each orchestrator warning
once, a closing summary; rows of an earlier launch (a resumed run) are not reported again."""

import io
import json
import time

from looprl.launch.progress import RunProgress, duration, warning_message
from looprl.paths import log_path
from looprl.store.records import RunInfo
from looprl.store.writer import RunStoreWriter

WARNING = ("2025-01-01 12:00:00.123 | WARNING  | looprl.session.rewards:70 | "
           "orchestrator.reward_weights names 'typo', but no scored rollout of step 1 emitted it\n")


def test_steps_warnings_and_summary(tmp_path):
    writer = RunStoreWriter(tmp_path)
    writer.start_run(RunInfo(run_id="run", kind="rl", env="x.py:E", env_name="E", model="m", created_at=time.time()))
    writer.write_step("run", 1, {"reward": 0.1})  # before this launch: a resumed run's earlier step
    out = io.StringIO()
    progress = RunProgress(tmp_path, max_steps=3, first_step=2, out=out)
    progress.follow()
    progress.poll()
    assert out.getvalue() == ""
    log = log_path(tmp_path, "orchestrator")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("2025-01-01 12:00:00.000 | INFO     | looprl.orchestrator.loop:1 | step 2 | reward ...\n"
                   + WARNING + WARNING[:40])  # the last line is still being written
    writer.write_step("run", 2, {"reward": 0.25, "gen_tokens_per_s": 120.0, "train/train_tokens_per_s": 900.0,
                                 "eval/reward": 0.5})
    progress.poll()
    with open(log, "a") as f:
        f.write(WARNING[40:] + WARNING)
    writer.write_step("run", 3, {"reward": 0.75, "eval/reward": 1.0})
    writer.close()
    progress.close(completed=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("step 2/3 | reward 0.250 | eval 0.500 | ")
    assert "s/step | gen 120 tok/s train 900 tok/s | ETA " in lines[0]
    assert lines[1] == "warning: orchestrator.reward_weights names 'typo', but no scored rollout of step 1 emitted it"
    assert lines[2].startswith("step 3/3 | reward 0.750 | eval 1.000 | ") and lines[2].endswith("ETA 0s")
    assert lines[3].startswith("looprl rl: done in ")
    assert lines[3].endswith("3 steps: final reward 0.750, eval reward 1.000") and len(lines) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "looprl.db"]  # the progress reader closed


def test_warning_lines_in_text_and_json():
    assert warning_message(WARNING.strip()).startswith("orchestrator.reward_weights names 'typo'")
    assert warning_message(json.dumps({"level": "WARNING", "message": "m"})) == "m"
    assert warning_message(json.dumps({"level": "INFO", "message": "m"})) is None
    assert warning_message("2025-01-01 12:00:00.000 | INFO     | x:1 | step 1") is None


def test_durations():
    assert [duration(s) for s in (4.4, 192, 3900)] == ["4s", "3m12s", "1h05m"]
