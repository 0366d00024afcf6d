"""A training step's metrics, from its rollouts and the trainer's report, and the one-line summary.

Metric names (the JSON object stored per step, `looprl metrics` prints them):

- `reward`, `reward_std`, `reward/<component>`, `reward/<component>_std`: over scored rollouts,
  components zero-filled across the batch; `pass_rate`: share of scored rollouts with reward > 0.
- `rollouts`, `failed`, `termination/<reason>`; `groups_skipped` (zero advantage, out of the batch).
- `groups_dropped`, `rollouts_dropped`: groups that started on weights more than
  `max_off_policy_steps` behind the step (stored with no advantage, not trained, not in the rewards).
- `off_policy_lag`: mean number of optimizer steps between the policy that generated the batch and
  the one it trains.
- `prompt_tokens`, `completion_tokens`, `completion_len` (mean per rollout), `samples`, `micro_batches`.
- `sample_breaks`: samples beyond a rollout's first, i.e. multi-turn calls whose prompt tokens did not
  extend the previous call's prompt + completion (the chat template re-rendered earlier turns
  differently, or the env rewrote the history): token drift, trained as separate samples.
- `gen_span_s` (first rollout start to last rollout end; groups may have started during the
  previous step), `gen_tokens_per_s` (completion tokens / `gen_span_s`), `gen_time_s` (how long the
  step waited for its groups: 0 when they all finished during the previous step), `wait_time_s`
  (waiting for the trainer's weights), `step_time_s`.
- From the trainer, prefixed `train/`: `loss`, `entropy`, `mismatch_kl`, `clipped_frac`, `grad_norm`,
  `lr`, `train_tokens_per_s`, `train_time_s`, ...
- From evaluations, prefixed `eval/`: `reward`, `reward/<component>`, `pass_rate`, `policy_version`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from looprl.session.rewards import reward_stats, total_reward
from looprl.store.records import RolloutRecord


def rollout_metrics(records: Sequence[RolloutRecord], weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """Rewards, pass rate, termination reasons and token counts of a set of rollouts."""
    scored = [r for r in records if r.scored]
    metrics: dict[str, float] = dict(reward_stats(records, weights))
    metrics["pass_rate"] = sum(total_reward(r.rewards, weights) > 0 for r in scored) / max(len(scored), 1)
    metrics["rollouts"] = float(len(records))
    metrics["failed"] = float(len(records) - len(scored))
    for reason, count in Counter(r.termination_reason for r in records).items():
        metrics[f"termination/{reason}"] = float(count)
    metrics["prompt_tokens"] = float(sum(r.prompt_tokens for r in records))
    metrics["completion_tokens"] = float(sum(r.completion_tokens for r in records))
    metrics["completion_len"] = metrics["completion_tokens"] / max(len(records), 1)
    if records:
        metrics["gen_span_s"] = max(r.finished_at for r in records) - min(r.started_at for r in records)
        metrics["gen_tokens_per_s"] = metrics["completion_tokens"] / max(metrics["gen_span_s"], 1e-9)
    return metrics


def summary_line(step: int, m: Mapping[str, Any]) -> str:
    """`step 3 | reward 0.412 (correct 0.21 brief 0.20) pass 0.53 | ...` for the orchestrator log."""
    components = " ".join(f"{k.removeprefix('reward/')} {v:.2f}" for k, v in m.items()
                          if k.startswith("reward/") and not k.endswith("_std"))
    reasons = ",".join(f"{k.removeprefix('termination/')}={int(v)}" for k, v in m.items()
                       if k.startswith("termination/"))
    line = (f"step {step} | reward {m.get('reward', float('nan')):.3f} ({components}) pass {m.get('pass_rate', 0):.2f}"
            f" | {reasons} skipped {int(m.get('groups_skipped', 0))} dropped {int(m.get('groups_dropped', 0))}"
            f" | len {m.get('completion_len', 0):.1f}"
            f" | gen {m.get('gen_tokens_per_s', 0):.0f} tok/s {m.get('gen_time_s', 0):.1f}s"
            f" wait {m.get('wait_time_s', 0):.1f}s")
    if "train/loss" in m:
        line += (f" | loss {m['train/loss']:.4f} entropy {m['train/entropy']:.3f} kl {m['train/mismatch_kl']:.2e}"
                 f" grad {m['train/grad_norm']:.3f} lr {m['train/lr']:.1e}"
                 f" train {m['train/train_tokens_per_s']:.0f} tok/s {m['train/train_time_s']:.1f}s")
    if "eval/reward" in m:
        line += f" | eval {m['eval/reward']:.3f}"
    return line
