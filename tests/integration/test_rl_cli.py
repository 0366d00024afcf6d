"""`looprl rl` end to end on a tiny random-weight model: steps, checkpoints, log files, metrics, resume.

The run directory after 3 steps is checked (no weight broadcast and no `-wal`/`-shm` left; the weights
went through the shared-memory region, `trainer.weight_handoff = "auto"`, removed at the end), and the
command's own output (a line per step, the reward-weight warning once, a summary); then the last
checkpoint is removed (as if the run had died between checkpoints 2 and 3) and `--resume` with
`max_steps = 4` must redo steps 3 and 4: every step exactly once in the store, train rollouts exactly
`batch_size` per step.
"""

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from tests.support.rl_env import write_data, write_levels, write_rl_config
from tests.unit.inference.conftest import build_tiny_model

from looprl.handoff.files import read_model
from looprl.handoff.step_messages import TrainBatch
from looprl.paths import batch_path

ROOT = Path(__file__).resolve().parents[2]


def looprl(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "looprl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def config(tmp_path: Path) -> Path:
    return write_rl_config(tmp_path / "rl.toml", model=build_tiny_model(tmp_path / "tiny"),
                           data=write_data(tmp_path / "data"), run=tmp_path / "run", max_steps=3, overrides={
                               "orchestrator": {"eval": {"interval": 2, "num_examples": 2}},
                               "trainer": {"checkpoint": {"interval": 2, "keep": 2}}})


def store_steps(run: Path) -> tuple[list[int], list[tuple[int, int]]]:
    with closing(sqlite3.connect(run / "looprl.db")) as db:
        steps = [r[0] for r in db.execute("SELECT step FROM steps ORDER BY step")]
        rollouts = list(db.execute(
            "SELECT step, count(*) FROM rollouts WHERE split='train' GROUP BY step ORDER BY step"))
        dropped = dict(db.execute("SELECT step, json_extract(metrics, '$.rollouts_dropped') FROM steps"))
    # rollouts dropped as too far off-policy are stored at the step that dropped them
    return steps, [(step, count - int(dropped.get(step) or 0)) for step, count in rollouts]


def metric_rows(run: Path) -> list[dict]:
    """`looprl metrics RUN --json`: each stored step's metrics."""
    return [json.loads(line) for line in looprl("metrics", str(run), "--json").stdout.splitlines()]


def level_config(tmp_path: Path, run: Path, max_steps: int, collapse: dict,
                 level: Callable[[int], float] = lambda i: i % 2, env: str = "LevelEnv",
                 sampling: dict | None = None) -> Path:
    """A tiny run of `env` on `write_levels`' data (`LevelEnv`: every reply to an example gets its level, so no
    group ever has signal), no evals, with `[orchestrator.collapse]` set to `collapse` (and
    `[orchestrator.sampling]` to `sampling`)."""
    return write_rl_config(tmp_path / "rl.toml", model=build_tiny_model(tmp_path / "tiny"),
                           data=write_levels(tmp_path / "data", level=level), run=run, max_steps=max_steps,
                           overrides={"env": {"source": f"tests/support/rl_env.py:{env}"},
                                      "orchestrator": {"collapse": collapse, "eval": {"num_examples": 0},
                                                       "sampling": sampling or {}}})


def check_trainer_logprobs(run: Path) -> None:
    """Every trained rollout's calls carry the trainer's logprobs; the inspector's token view of one
    shows them, close to the sampler's at step 1 (the same weights)."""
    from fastapi.testclient import TestClient

    from looprl.inspector.app import create_app

    with closing(sqlite3.connect(run / "looprl.db")) as db:
        trained = [r[0] for r in db.execute("SELECT rollout_id FROM rollouts WHERE split='train' AND advantage "
                                            "IS NOT NULL ORDER BY step, rowid")]
        missing = db.execute("SELECT COUNT(*) FROM model_calls c JOIN rollouts r USING (rollout_id) WHERE "
                             "r.advantage IS NOT NULL AND c.status=200 AND c.trainer_logprobs IS NULL").fetchone()[0]
        eval_calls = db.execute("SELECT COUNT(*) FROM model_calls c JOIN rollouts r USING (rollout_id) WHERE "
                                "r.split='eval' AND c.trainer_logprobs IS NOT NULL").fetchone()[0]
    assert trained and missing == 0 and eval_calls == 0
    inspector = TestClient(create_app([run]), base_url="http://127.0.0.1:8765")
    view = inspector.get(f"/api/runs/run/rollouts/{trained[0]}/tokens").json()
    assert view["trained"] and view["trainer_logprobs_recorded"]
    for call in view["calls"]:
        assert len(call["trainer_logprobs"]) == len(call["logprobs"]) == len(call["token_ids"]) > 0
        assert max(abs(t - s) for t, s in zip(call["trainer_logprobs"], call["logprobs"])) < 1e-2


def check_tracker(log_dir: Path, run: Path) -> None:
    """`[log.trackers]`: every step's metrics, the evals among them, the config and the links reached TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    events.Reload()
    assert [e.step for e in events.Scalars("reward")] == [1, 2, 3]
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3]
    assert [e.step for e in events.Scalars("eval/reward")] == [1, 3]
    links = events.Tensors("links/text_summary")[0].tensor_proto.string_val[0].decode()
    assert str(run.resolve()) in links and "/runs/run" in links
    assert '"max_steps": 3' in events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()


def test_rl_runs_checkpoints_and_resumes(tmp_path):
    cfg = config(tmp_path)
    run = tmp_path / "run"
    out = looprl("rl", "@", str(cfg), "--orchestrator.reward_weights.typo", "2",
                 "--log.trackers.tensorboard.log_dir", str(tmp_path / "tb")).stdout
    assert f"looprl metrics {run}" in out and "engine ready in " in out
    lines = out.splitlines()
    steps = [line for line in lines if line.startswith("step ")]
    assert [line.split(" | ")[0] for line in steps] == ["step 1/3", "step 2/3", "step 3/3"]
    assert all(" | reward " in line and "s/step" in line and " tok/s" in line and "| ETA " in line for line in steps)
    assert "| eval " in steps[0] and "| eval " not in steps[1] and "| eval " in steps[2]
    assert sum("warning: orchestrator.reward_weights names 'typo'" in line for line in lines) == 1
    assert any(line.startswith("looprl rl: done in ") and "3 steps: final reward " in line and "eval reward " in line
               for line in lines)
    assert [p.name for p in (run / "broadcasts").iterdir()] == []  # each removed once the engine had it
    assert sorted(p.name for p in run.glob("looprl.db*")) == ["looprl.db"]
    for name in ("inference", "orchestrator", "trainer"):
        assert (run / "logs" / f"{name}.log").stat().st_size > 0
    assert (run / "logs" / "envs" / "train" / "CharsEnv" / "env_server.log").is_file()
    assert "step 3 | reward" in (run / "logs" / "orchestrator.log").read_text()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_2", "step_3"]
    assert (run / "checkpoints" / "step_3" / "model.safetensors").is_file()  # no broadcast file to link
    assert 'weight_handoff = "shared_memory"' in (run / "config.toml").read_text()  # `auto`, the engine here
    region = re.search(r"through the shared-memory region (\S+) \(the parameters live in it\)",
                       (run / "logs" / "trainer.log").read_text())
    assert region and region[1].startswith("/dev/shm/looprl-weights-")
    assert not Path(region[1]).parent.exists()  # removed with the run
    assert store_steps(run) == ([1, 2, 3], [(1, 8), (2, 8), (3, 8)])
    check_trainer_logprobs(run)
    check_tracker(tmp_path / "tb", run)

    rows = metric_rows(run)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all("reward" in r and "train/loss" in r and "train/mismatch_kl" in r for r in rows)
    assert all(0 <= r["train/broadcast_time_s"] < 1 for r in rows)
    assert "eval/reward" in rows[0] and "eval/reward" not in rows[1] and "eval/reward" in rows[2]  # steps 1, 3, end
    assert rows[0]["train/mismatch_kl"] < 1e-3  # step 1 trains on its own weights' samples
    assert all("groups_dropped" in r and "rollouts_dropped" in r and r["off_policy_lag"] <= 1 for r in rows)
    assert "reward" in looprl("metrics", str(run)).stdout
    assert sorted(p.name for p in run.glob("looprl.db*")) == ["looprl.db"]  # readers leave nothing either

    shutil.rmtree(run / "checkpoints" / "step_3")
    looprl("rl", "@", str(cfg), "--max_steps", "4", "--resume")
    assert store_steps(run) == ([1, 2, 3, 4], [(1, 8), (2, 8), (3, 8), (4, 8)])
    assert "resumed from checkpoint step 2" in (run / "logs" / "trainer.log").read_text()
    assert (run / "checkpoints" / "step_4").is_dir()


def test_rl_with_lora_trains_adapters_and_resumes(tmp_path):
    """Also the process-log layout with `log.json_logging`: every process line is one JSON object."""
    cfg = config(tmp_path)
    run = tmp_path / "run"
    lora = ["--trainer.lora.rank", "4", "--trainer.checkpoint.interval", "1", "--log.json_logging", "true"]
    looprl("rl", "@", str(cfg), "--max_steps", "2", *lora)
    assert (run / "checkpoints" / "step_2" / "adapter_model.safetensors").is_file()
    # merged, for the engine (which refuses adapter weights); removed once loaded
    assert (f"loaded weights version 2 from {run.resolve() / 'broadcasts' / 'step_2'}"
            in (run / "logs" / "inference.log").read_text())
    # the resumed trainer re-broadcasts its restored weights
    assert [p.name for p in (run / "broadcasts").iterdir()] == []
    looprl("rl", "@", str(cfg), "--max_steps", "3", "--resume", *lora)
    assert store_steps(run) == ([1, 2, 3], [(1, 8), (2, 8), (3, 8)])
    assert "engine on weights version 2" in (run / "logs" / "orchestrator.log").read_text()
    for name in ("trainer", "orchestrator", "inference"):
        lines = (run / "logs" / f"{name}.log").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert records and all(r["process"] == name for r in records)
    for split in ("train", "eval"):
        env_logs = run / "logs" / "envs" / split / "CharsEnv"
        assert (env_logs / "env_server.log").is_file() and (env_logs / "env_worker_0.log").is_file()


def test_rl_collapse_recovery_reports_a_task_without_signal(tmp_path):
    """`[orchestrator.collapse]` through `looprl rl` on the tiny random-weight model (seeded) with greedy
    sampling: every rollout of every group gets the same reward from step 1, so when the watch fires at
    step 3 the recovery does not raise the temperature (nothing was lost to recover) but reports the task
    as not learnable at these settings: in the output, the orchestrator's log and the `collapse/...`
    metrics. Resumed from step 4 for 3 more steps, it says so no more: the watch and the recovery go on from the
    stored steps (tests/unit/session/test_collapse_recovery.py resumes at every step of a longer run). (The raise
    itself: tests/unit/orchestrator/test_recovery_sampling.py, and the SmolLM2 run in docs/training.md.)"""
    path = config(tmp_path)
    text = path.read_text().replace("max_steps = 3", "max_steps = 4").replace(
        "[orchestrator.sampling]\n",
        "[orchestrator.collapse]\nmethod = \"temperature\"\nraise_by = 0.5\n"
        "[orchestrator.sampling]\ntemperature = 0.0\n")
    path.write_text(text.replace("interval = 2\nnum_examples = 2", "num_examples = 0"))
    out = looprl("rl", "@", str(path)).stdout
    rows = metric_rows(tmp_path / "run")
    assert [r["collapse/temperature"] for r in rows] == [0.0] * 4
    assert [r["step"] for r in rows if r.get("collapse/unlearnable")] == [3]
    assert not any("collapse/raise" in r for r in rows)
    line = ("no learning signal since the run started: every rollout got the same reward (2 of 2 groups at step 3 "
            "without signal); the task is not learnable at these settings")
    assert line in out
    assert line in (tmp_path / "run" / "logs" / "orchestrator.log").read_text()

    resumed = looprl("rl", "@", str(path), "--max_steps", "7", "--resume").stdout
    assert "resumed after step 4" in (tmp_path / "run" / "logs" / "orchestrator.log").read_text()
    rows = metric_rows(tmp_path / "run")
    assert [r["step"] for r in rows] == list(range(1, 8))
    assert [r["step"] for r in rows if r.get("collapse/unlearnable")] == [3]
    assert "no learning signal since the run started" not in resumed and "stopped exploring" not in resumed


def test_rl_collapse_recovery_escalates_from_the_temperature_to_a_rollback(tmp_path):
    """The temperature recovery with `escalate` through `looprl rl` (`LevelEnv`: no group ever has signal,
    rewards differ between examples): the watch fires at step 3 and the temperature goes up; step 4 is still
    stuck, and with `max_attempts = 1` the recovery escalates: sampling back at the configured temperature,
    the trainer back to the run's first weights (`rollback_to = "start"`: a restart) at 0.7 of the learning rate
    (the default `lr_factor`). In the output, the trainer's log, the metrics and the inspector's marks."""
    from fastapi.testclient import TestClient

    from looprl.inspector.app import create_app

    run = tmp_path / "run"
    path = level_config(tmp_path, run, 5, {"max_attempts": 1, "escalate": True, "rollback_to": "start"})
    out = looprl("rl", "@", str(path)).stdout
    line = ("collapse recovery: 2 of 2 groups at step 4 without signal, policy not exploring; the raised temperature "
            "brought no signal back, so sampling is back at the configured temperature, and from now on rollbacks; "
            "weights back to the run's first (rollback_to = 'start': a restart), AdamW's momentum zeroed, "
            "learning rate x1 -> x0.7 (rollback 1)")
    assert line in out and line in (run / "logs" / "orchestrator.log").read_text()
    assert "step 4: collapse recovery, weights back to the run's first" in (run / "logs" / "trainer.log").read_text()
    rows = metric_rows(run)
    assert [r["collapse/temperature"] for r in rows] == [1.0, 1.0, 1.25, 1.0, 1.0]
    assert [r.get("collapse/lr_scale") for r in rows] == [None, None, None, 0.7, 0.7]
    assert [r["train/lr"] for r in rows] == [1e-3, 1e-3, 1e-3, 7e-4, 7e-4]
    assert [r.get("collapse/from_start") for r in rows] == [None, None, None, 1.0, None]
    marks = TestClient(create_app([run]), base_url="http://127.0.0.1:8765").get("/api/runs/run/metrics").json()
    assert [(m["step"], m["action"], m["value_from"], m["value_to"]) for m in marks["interventions"]] == [
        (3, "raise", 1.0, 1.25), (4, "escalate", 1.0, 0.7)]
    assert marks["interventions"][1]["message"] == line


def test_rl_collapse_recovery_puts_an_entropy_bonus_in_the_loss_from_its_first_intervention(tmp_path):
    """`[orchestrator.collapse] entropy_coef` through `looprl rl`: sampled greedily (`LevelCharsEnv`), every group
    is alike until the watch fires at step 3; the temperature goes up and the bonus goes on, and the groups
    sampled hotter train with it: the trainer's `train/entropy_bonus` is the coefficient times its entropy from
    then on, zero before. In the output, the metrics and the inspector's mark."""
    from fastapi.testclient import TestClient

    from looprl.inspector.app import create_app

    run = tmp_path / "run"
    path = level_config(tmp_path, run, 5, {"raise_by": 1.0, "max_temperature": 1.0, "entropy_coef": 0.01},
                        level=lambda i: i / 6, env="LevelCharsEnv", sampling={"temperature": 0.0})
    out = looprl("rl", "@", str(path)).stdout
    line = ("collapse recovery: 2 of 2 groups at step 3 without signal, policy not exploring; sampling temperature "
            "of the next groups 0 -> 1 (raise 1); entropy bonus 0.01 in the loss from now on")
    assert line in out and line in (run / "logs" / "orchestrator.log").read_text()
    rows = metric_rows(run)
    assert [r.get("collapse/entropy_coef") for r in rows] == [None, None, 0.01, 0.01, 0.01]
    handed = [read_model(batch_path(run, step), TrainBatch) for step in range(1, 6)]
    assert [b and b.entropy_coef for b in handed] == [0.0, 0.0, 0.01, 0.01, 0.01]
    trained = [r for r in rows[3:] if r["samples"]]
    assert trained and all(r["train/entropy_bonus"] == pytest.approx(0.01 * r["train/entropy"], rel=1e-4)
                           and r["train/entropy_bonus"] > 0 for r in trained)
    marks = TestClient(create_app([run]), base_url="http://127.0.0.1:8765").get("/api/runs/run/metrics").json()
    first = marks["interventions"][0]
    assert (first["step"], first["action"], first["entropy_coef"], first["message"]) == (3, "raise", 0.01, line)


def test_rl_collapse_recovery_holds_the_entropy_bonus_off_above_its_ceiling(tmp_path):
    """`[orchestrator.collapse] entropy_ceiling` through `looprl rl`: as in the test above the bonus goes on at step 3,
    and with a ceiling of 0.01 times the first trained steps' entropy it is held off as soon as the trainer has
    reported one: the batches carry no bonus from then on, the trainer takes none off the loss, and the metrics and
    the orchestrator's log say so."""
    run = tmp_path / "run"
    path = level_config(tmp_path, run, 6, {"raise_by": 1.0, "max_temperature": 1.0, "entropy_coef": 0.01,
                                           "entropy_ceiling": 0.01},
                        level=lambda i: i / 6, env="LevelCharsEnv", sampling={"temperature": 0.0})
    looprl("rl", "@", str(path))
    rows = metric_rows(run)
    handed = [read_model(batch_path(run, step), TrainBatch) for step in range(1, 7)]
    assert [r.get("collapse/entropy_coef") for r in rows] == [None, None] + [0.01] * 4
    held = [r.get("collapse/entropy_held") for r in rows]
    assert held[:3] == [None, None, 0.0] and held[-1] == 1.0  # no entropy reported before the bonus went on
    assert [b and b.entropy_coef for b in handed] == [0.0, 0.0] + [0.0 if h else 0.01 for h in held[2:]]
    assert all(r["train/entropy_bonus"] == 0.0 for r, h in zip(rows, held) if h)
    start = rows[-1]["collapse/entropy_start"]
    assert rows[-1]["collapse/entropy_limit"] == pytest.approx(0.01 * start)
    assert re.search(r"collapse recovery: the policy's entropy at step \d, [\d.]+ a token, is above [\d.e-]+ "
                     rf"\(entropy_ceiling 0.01 times {start:.3g}, the mean over the run's first 3 steps that "
                     r"trained\): "
                     "the entropy bonus is off until the entropy is back under it",
                     (run / "logs" / "orchestrator.log").read_text())


def test_rl_collapse_recovery_says_when_the_reward_rose_after_it_gave_up(tmp_path):
    """Issue 37's honest detection through `looprl rl` (`RisingEnv`: no group has signal, the rewards 0.4 and 0.6 by
    example, until every reply gets 1, the solved reward, from about step 10): the rollback recovery rolls back at step
    3 and gives up at step 6, the reward hardly risen, "the task does not look learnable at these settings so far";
    once the mean of the last steps is half the way to 1 it says the reward rose since, once, in the output, the log,
    the `collapse/rose` metric and the inspector's marks."""
    from fastapi.testclient import TestClient

    from looprl.inspector.app import create_app

    run = tmp_path / "run"
    path = level_config(tmp_path, run, 18, {"method": "rollback", "max_attempts": 1, "solved_reward": 1.0},
                        level=lambda i: 0.4 + i % 2 / 5, env="RisingEnv")
    out = looprl("rl", "@", str(path)).stdout
    rows = metric_rows(run)
    assert [r["step"] for r in rows if r.get("collapse/rollback")] == [3]
    assert [r["step"] for r in rows if r.get("collapse/give_up")] == [6]
    [rose] = [r for r in rows if r.get("collapse/rose")]
    assert rose["collapse/reward_recent"] >= 0.75 and rose["collapse/reward_best"] == 1.0
    log = (run / "logs" / "orchestrator.log").read_text()
    assert "the task does not look learnable at these settings so far" in out
    line = f"collapse recovery: at step {rose['step']} the reward has risen since it gave up (mean reward"
    assert line in out and line in log and log.count("the reward has risen since it gave up") == 1
    marks = TestClient(create_app([run]), base_url="http://127.0.0.1:8765").get("/api/runs/run/metrics").json()
    assert [(m["step"], m["action"]) for m in marks["interventions"]] == [
        (3, "rollback"), (6, "give_up"), (rose["step"], "rose")]
    assert marks["interventions"][2]["plateau"] and line in marks["interventions"][2]["message"]


def test_rl_mask_truncated_leaves_replies_cut_off_out_of_the_loss(tmp_path):
    """`orchestrator.mask_truncated` through `looprl rl`: 4-token replies that stop early at a few letters (`stop`),
    the rest cut off at `max_tokens`. Every reply cut off beside a finished sibling is stored without an advantage
    and counted in `rollouts_masked`, a group in which no reply finished keeps its advantages, the trainer's loss
    tokens are exactly the completion tokens of the rollouts stored with one, and the inspector's token view says
    why a cut-off reply did not train."""
    from fastapi.testclient import TestClient

    from looprl.inspector.app import create_app

    run = tmp_path / "run"
    path = write_rl_config(tmp_path / "rl.toml", model=build_tiny_model(tmp_path / "tiny"),
                           data=write_data(tmp_path / "data"), run=run, max_steps=3, overrides={
                               "orchestrator": {"mask_truncated": True, "eval": {"num_examples": 0},
                                                "sampling": {"max_tokens": 4, "stop": ["e"]}}})
    looprl("rl", "@", str(path))
    rows = metric_rows(run)
    with closing(sqlite3.connect(run / "looprl.db")) as db:
        rollouts = list(db.execute("SELECT rollout_id, step, termination_reason, advantage, completion_tokens, "
                                   "group_id FROM rollouts WHERE split='train'"))
    finished = {r[5] for r in rollouts if r[2] == "finished"}
    cut = [r for r in rollouts if r[2] == "output_exceeded" and r[5] in finished]
    trained = [r for r in rollouts if r[3] is not None]
    assert cut and trained and all(r[3] is None for r in cut)
    signal = {r[5] for r in trained}  # a group with a trained reply had signal, so its cut-off replies were masked
    assert sum(r["rollouts_masked"] for r in rows) >= sum(r[5] in signal for r in cut) > 0
    none_finished = [r for r in rollouts if r[5] not in finished]
    assert none_finished and all(r[5] not in signal or r[3] is not None for r in none_finished)
    for row in rows:
        assert row["train/loss_tokens"] == sum(r[4] for r in trained if r[1] == row["step"])
    inspector = TestClient(create_app([run]), base_url="http://127.0.0.1:8765")
    masked = next(r for r in cut if r[5] in signal)
    view = inspector.get(f"/api/runs/run/rollouts/{masked[0]}/tokens").json()
    assert not view["trained"] and "orchestrator.mask_truncated leaves it out of the loss" in view["why"]
    # the inspector's baseline takes the group's advantages as the orchestrator did: the cut-off reply's reward in
    # the mean, no advantage of its own, its trained siblings' advantages as stored
    baseline = inspector.get(f"/api/runs/run/rollouts/{masked[0]}/explain").json()["baseline"]
    assert baseline["advantage"] is None and masked[0] in {m["rollout_id"] for m in baseline["members"] if m["counted"]}
    sibling = next(r for r in trained if r[5] == masked[5])
    explained = inspector.get(f"/api/runs/run/rollouts/{sibling[0]}/explain").json()["baseline"]
    assert explained["advantage"] == pytest.approx(sibling[3])


def test_rl_run_twice_with_one_seed_samples_the_same_replies(tmp_path):
    """`seed` through `looprl rl`: two runs of one config draw the same sampling seeds for the same rollouts (the
    example order's draw and the sibling's place, not the rollouts' random ids), so on the CPU they sample the same
    replies at every step, train alike and store the same rewards and evals (`bench/same_seed.py` says so); siblings
    still get replies of their own, and a third run with the same example order but another
    `orchestrator.sampling.seed` samples other replies."""
    def replies(run: Path) -> list[tuple]:
        with closing(sqlite3.connect(run / "looprl.db")) as db:
            return sorted(db.execute("SELECT r.split, r.step, r.example_id, c.completion_token_ids, r.reward "
                                     "FROM rollouts r JOIN model_calls c USING (rollout_id)"))

    runs = []
    for name, sampling_seed in (("a", 3), ("b", 3), ("c", 4)):
        run = tmp_path / name
        path = write_rl_config(tmp_path / f"{name}.toml", model=build_tiny_model(tmp_path / "tiny"),
                               data=write_data(tmp_path / "data"), run=run, max_steps=3,
                               overrides={"seed": 3, "orchestrator": {"eval": {"interval": 2, "num_examples": 2},
                                                                      "sampling": {"seed": sampling_seed}}})
        looprl("rl", "@", str(path))
        runs.append(replies(run))
    assert len(runs[0]) == 3 * 8 + 2 * 2 and runs[0] == runs[1] and runs[0] != runs[2]
    assert [(s, e) for _, s, e, *_ in runs[0]] == [(s, e) for _, s, e, *_ in runs[2]]  # the same draws
    for step in (1, 2, 3):  # each group of 4 siblings: replies of their own
        by_example: dict[str, set] = {}
        for split, s, example, tokens, _ in runs[0]:
            if split == "train" and s == step:
                by_example.setdefault(example, set()).add(tokens)
        assert all(len(replies) > 1 for replies in by_example.values())
    compared = subprocess.run([sys.executable, "bench/same_seed.py", str(tmp_path / "a"), str(tmp_path / "b")],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    assert [line.split()[3] for line in compared[1:]] == ["100%"] * 3


def test_rl_solved_reward_counts_groups_at_it_as_solved(tmp_path):
    """`[orchestrator.collapse] solved_reward` through `looprl rl`: every reply gets 0.5 (`LevelEnv`, every level
    0.5), so no group ever has signal. Without it that is a run that cannot learn (the test above); at 0.5 or
    below it is a solved task: every group counted in `groups_solved`, no collapse warning, no intervention; and
    a rollout above it (0.5 > 0.25) is warned of once, as a setting lower than the task's maximum."""
    run = tmp_path / "run"
    path = level_config(tmp_path, run, 4, {"solved_reward": 0.25}, level=lambda i: 0.5)
    out = looprl("rl", "@", str(path)).stdout
    rows = metric_rows(run)
    assert [(r["groups_skipped"], r["groups_solved"]) for r in rows] == [(2.0, 2.0)] * 4
    assert not any(k in r for r in rows for k in ("collapse/raise", "collapse/unlearnable"))
    assert "stopped exploring" not in out
    warning = "a rollout's reward 0.5 is above orchestrator.collapse.solved_reward = 0.25"
    assert out.count(warning) == 1 and warning in (run / "logs" / "orchestrator.log").read_text()


def test_rl_collapse_recovery_rolls_back_at_a_lower_learning_rate(tmp_path):
    """`[orchestrator.collapse] method = "rollback"` through `looprl rl`: no group ever has signal while the
    rewards differ between examples (`LevelEnv`), so the watch fires at step 3 and, no step having explored,
    the trainer goes back to the run's first weights and halves the learning rate, and the default entropy bonus
    goes on: in the output, both processes' logs, the `collapse/...` metrics, the trainer's `train/lr`, `looprl
    metrics` and the inspector's run page."""
    from fastapi.testclient import TestClient

    from looprl.inspector.app import create_app

    run = tmp_path / "run"
    path = level_config(tmp_path, run, 4, {"method": "rollback", "lr_factor": 0.5})
    out = looprl("rl", "@", str(path)).stdout
    line = ("collapse recovery: 2 of 2 groups at step 3 without signal, policy not exploring; weights back to the "
            "run's first (no step yet whose groups mostly had signal), AdamW's momentum zeroed, learning rate x1 -> "
            "x0.5 (rollback 1); entropy bonus 0.01 in the loss from now on")
    assert line in out and line in (run / "logs" / "orchestrator.log").read_text()
    assert "step 3: collapse recovery, weights back to the last kept" in (run / "logs" / "trainer.log").read_text()
    rows = metric_rows(run)
    assert [r["step"] for r in rows if r.get("collapse/rollback")] == [3]
    assert [r["collapse/lr_scale"] for r in rows] == [1.0, 1.0, 0.5, 0.5]
    assert [r["train/lr"] for r in rows] == [1e-3, 1e-3, 5e-4, 5e-4]  # from the rollback on (step 3 trains nothing)
    table = looprl("metrics", str(run)).stdout.splitlines()
    assert " lr " in next(row for row in table if row.startswith("step"))
    inspector = TestClient(create_app([run]), base_url="http://127.0.0.1:8765")
    marks = inspector.get("/api/runs/run/metrics").json()["interventions"]
    assert [(m["step"], m["action"], m["value_from"], m["value_to"], m["message"]) for m in marks] == [
        (3, "rollback", 1.0, 0.5, line)]
