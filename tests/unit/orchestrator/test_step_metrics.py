"""Step metrics from stored rollouts: zero-filled component means, pass rate, reasons, tokens; the summary line."""

from looprl.orchestrator.step_metrics import lag_metrics, rollout_metrics, summary_line
from looprl.store.records import RolloutRecord


def record(reason="finished", rewards=None, completion_tokens=10, started_at=0.0, finished_at=1.0):
    return RolloutRecord(rollout_id="r", group_id="g", example_id="e", split="train", messages=[], run_id="run",
                         env_name="E", termination_reason=reason, rewards=rewards or {}, started_at=started_at,
                         finished_at=finished_at,
                         completion_tokens=completion_tokens, prompt_tokens=5)


def test_rollout_metrics():
    records = [record(rewards={"correct": 1.0, "format": 1.0}), record(rewards={"format": 1.0}),
               record(rewards={"format": 0.0}), record("model_error", completion_tokens=0)]
    m = rollout_metrics(records, {"format": 0.5})
    assert m["reward"] == (1.5 + 0.5 + 0.0) / 3
    assert m["reward/correct"] == 1 / 3 and m["reward/format"] == 2 / 3
    assert m["pass_rate"] == 2 / 3 and m["failed"] == 1 and m["rollouts"] == 4
    assert m["termination/finished"] == 3 and m["termination/model_error"] == 1
    assert m["completion_tokens"] == 30 and m["completion_len"] == 7.5 and m["prompt_tokens"] == 20


def test_generation_throughput_spans_the_rollouts_not_the_steps_wait():
    """Groups that finished during the previous step still count their own generation time."""
    m = rollout_metrics([record(started_at=100.0, finished_at=103.0), record(started_at=101.0, finished_at=104.0)])
    assert m["gen_span_s"] == 4.0 and m["gen_tokens_per_s"] == 20 / 4.0


def test_summary_line_has_rewards_and_training_figures():
    m = rollout_metrics([record(rewards={"correct": 1.0})]) | {
        "train/loss": 0.1, "train/entropy": 1.0, "train/mismatch_kl": 1e-4, "train/grad_norm": 0.5, "train/lr": 1e-5,
        "train/train_tokens_per_s": 100.0, "train/train_time_s": 2.0, "eval/reward": 0.25}
    line = summary_line(3, m)
    assert line.startswith("step 3 | reward 1.000 (correct 1.00)") and "finished=1" in line
    assert "loss 0.1000" in line and "eval 0.250" in line


def test_lag_metrics_time_the_weight_handoff():
    """Step 5 trains version 4: groups on versions 3 and 4; version 4 was stable at 100, loaded at 103."""
    groups = [(3, 101.0), (4, 104.0), (4, 106.0)]
    m = lag_metrics(5, groups, published_at={3: 90.0, 4: 100.0}, loaded_at={3: 91.0, 4: 103.0})
    assert m["off_policy_lag"] == (1 + 0 + 0) / 3 and m["off_policy_lag_max"] == 1
    assert m["groups_behind_newest"] == 1  # the version-3 group started after version 4 was stable
    assert m["weights_load_delay_s"] == 3.0
    assert m["first_request_after_load_s"] == 101.0 - 103.0


def test_lag_metrics_on_the_initial_weights():
    m = lag_metrics(1, [(0, 5.0)], published_at={}, loaded_at={})
    assert m == {"off_policy_lag": 0.0, "off_policy_lag_max": 0.0, "groups_behind_newest": 0.0}
