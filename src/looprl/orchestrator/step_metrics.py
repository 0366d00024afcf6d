"""A training step's metrics, from its rollouts and the trainer's report, and the one-line summary.

Metric names (the JSON object stored per step, `looprl metrics` prints them):

- `reward`, `reward_std`, `reward/<component>`, `reward/<component>_std`: over scored rollouts,
  components zero-filled across the batch; `pass_rate`: share of scored rollouts with reward > 0.
- `rollouts`, `failed`, `termination/<reason>`; `groups_skipped` (zero advantage, out of the batch);
  `groups_failed` (out of the batch for failed rollouts: all of them, or one with `failed_group = "drop"`).
- `groups_sampled` (fresh groups that landed for the step: more than `batch_size / group_size` with
  dynamic sampling), `groups_kept` (those trained: with a learning signal, not failed), `no_signal_frac`
  (`groups_skipped / groups_sampled`: near 1 for steps in a row means the policy stopped exploring),
  `groups_solved` (skipped groups that say the task is solved: `session.collapse`).
- `groups_dropped`, `rollouts_dropped`: groups that started on weights more than
  `max_off_policy_steps` behind the step (stored with no advantage, not trained, not in the rewards).
- `off_policy_lag`, `off_policy_lag_max`: mean and largest number of optimizer steps between the
  weights a group started on and the policy that trains on it (step N trains version N - 1);
  `groups_behind_newest`: groups that started while a newer broadcast than the engine's was stable.
- `weights_load_delay_s`: for the newest weights the step's groups ran on, from the broadcast being
  stable to the engine having loaded it; `first_request_after_load_s`: from that load to the step's
  first model request (negative: the step's first groups started on older weights).
- `prompt_tokens`, `completion_tokens`, `completion_len` (mean per rollout), `samples`, `micro_batches`.
- `rollouts_masked` (with `orchestrator.mask_truncated`): rollouts of groups whose rewards differ, left out of the
  loss because a length limit cut them off while a sibling finished (a group left without a non-zero advantage is
  skipped: `groups_skipped`; a group in which no reply finished trains as usual);
  `termination/output_exceeded` counts every reply that reached `max_tokens`.
- `sample_breaks`: samples beyond a rollout's first, i.e. multi-turn calls whose prompt tokens did not
  extend the previous call's prompt + completion (the chat template re-rendered earlier turns
  differently, or the env rewrote the history): token drift, trained as separate samples.
- `gen_span_s` (first rollout start to last rollout end; groups may have started during the
  previous step), `gen_tokens_per_s` (completion tokens / `gen_span_s`), `gen_time_s` (how long the
  step waited for its groups: 0 when they all finished during the previous step), `wait_time_s`
  (waiting for the trainer's weights), `step_time_s`.
- From the trainer, prefixed `train/`: `loss`, `entropy`, `mismatch_kl`, `clipped_frac`, `grad_norm`,
  `lr`, `train_tokens_per_s`, `train_time_s`, ...; with a rollout correction `is_truncated_frac`,
  `is_masked_frac`, `is_weight`.
- From evaluations, prefixed `eval/`: `reward`, `reward/<component>`, `pass_rate`, `policy_version`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from looprl.envs.types import RolloutResult
from looprl.session.rewards import reward_stats, total_reward
from looprl.store.records import ModelCall, RolloutRecord


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


def first_request(group: Sequence[tuple[RolloutResult, Sequence[ModelCall]]]) -> float:
    """When a group's first model request was sent (epoch seconds; its first start if it made none)."""
    return min((c.started_at for _, calls in group for c in calls), default=min(r.started_at for r, _ in group))


def lag_metrics(step: int, groups: Sequence[tuple[int, float]], published_at: Mapping[int, float],
                loaded_at: Mapping[int, float]) -> dict[str, float]:
    """Off-policy lag and weight-handoff timing of a step's groups, each `(weights version, first request time)`.

    `published_at` and `loaded_at` (epoch seconds by version) say when each broadcast became stable
    and when the engine had loaded it; version 0 (the initial weights) has neither.
    """
    lags = [step - 1 - version for version, _ in groups]
    metrics = {"off_policy_lag": sum(lags) / max(len(lags), 1), "off_policy_lag_max": float(max(lags, default=0)),
               "groups_behind_newest": float(sum(any(v > version and t >= p for v, p in published_at.items())
                                                 for version, t in groups))}
    newest = max((version for version, _ in groups), default=0)
    if newest in loaded_at:
        metrics["first_request_after_load_s"] = min(t for _, t in groups) - loaded_at[newest]
        if newest in published_at:
            metrics["weights_load_delay_s"] = loaded_at[newest] - published_at[newest]
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
