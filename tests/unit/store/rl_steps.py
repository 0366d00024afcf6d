"""A run store with the step metrics a real `looprl rl` run records (names of
`looprl.orchestrator.step_metrics` and the trainer's report), including a step whose groups were all
skipped, so the trainer got no samples and reported zeros."""

from __future__ import annotations

from pathlib import Path

from looprl.store.records import RunInfo
from looprl.store.writer import RunStoreWriter

T0 = 1_700_000_000.0


def step_metrics(step: int, *, trained: bool = True, evaluated: bool = False) -> dict[str, float]:
    metrics = {
        "reward": 0.40625 + step / 10, "reward_std": 0.49, "reward/correct": 0.3125, "reward/correct_std": 0.46,
        "reward/brief": 0.1875, "reward/brief_std": 0.39, "pass_rate": 0.4375, "rollouts": 32.0, "failed": 1.0,
        "termination/finished": 31.0, "termination/timeout": 1.0, "prompt_tokens": 2816.0,
        "completion_tokens": 1423.0, "completion_len": 44.46875, "gen_span_s": 4.2, "gen_tokens_per_s": 338.8,
        "gen_time_s": 3.9, "off_policy_lag": 0.75, "groups_dropped": 1.0, "rollouts_dropped": 8.0,
        "groups_skipped": 1.0 if trained else 4.0, "samples": 24.0 if trained else 0.0,
        "micro_batches": 3.0 if trained else 0.0, "step_time_s": 9.123456,
        "train/loss": -0.0123456 if trained else 0.0, "train/entropy": 1.234567 if trained else 0.0,
        "train/mismatch_kl": 0.0001234 if trained else 0.0, "train/clipped_frac": 0.0123 if trained else 0.0,
        "train/ref_kl": 0.0, "train/grad_norm": 0.987654 if trained else 0.0, "train/lr": 1e-6,
        "train/tokens": 1865.0 if trained else 0.0, "train/loss_tokens": 1423.0 if trained else 0.0,
        "train/micro_batches": 3.0 if trained else 0.0, "train/train_time_s": 11.5,
        "train/train_tokens_per_s": 162.17, "train/broadcast_time_s": 0.4, "train/wait_time_s": 0.1,
    }
    if evaluated:
        metrics |= {"eval/reward": 1.275, "eval/reward/correct": 0.9, "eval/reward/brief": 0.375,
                    "eval/pass_rate": 0.9, "eval/completion_len": 12.5, "eval/policy_version": float(step)}
    return metrics


def build_rl_store(run_dir: Path, steps: int = 16, untrained: int = 3) -> Path:
    """Steps 1..`steps`; step `untrained` had every group skipped; eval at steps 1, 8 and the last."""
    w = RunStoreWriter(run_dir)
    w.start_run(RunInfo(run_id="demo-run", kind="rl", env="examples/demo/env.py:DemoEnv", env_name="DemoEnv",
                        model="smollm2-135m-instruct", created_at=T0))
    for step in range(1, steps + 1):
        w.write_step("demo-run", step, step_metrics(step, trained=step != untrained,
                                                    evaluated=step in (1, 8, steps)))
    w.close()
    return run_dir
