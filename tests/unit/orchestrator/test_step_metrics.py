"""Step metrics from stored rollouts: zero-filled component means, pass rate, reasons, tokens; the summary line."""

from looprl.orchestrator.step_metrics import rollout_metrics, summary_line
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
