"""The inspector's endpoints that explain one rollout: why it got its reward and advantage, which tokens
it sampled and trained on, and what its siblings replied (run-wide views: `looprl.inspector.run_analysis`).

Read-only, beside `looprl.inspector.api` (same `/api` prefix and run lookup). The advantage is
recomputed with the orchestrator's own `group_advantages`, from the run's resolved config, so the
page shows exactly the rule that produced the stored value.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request

from looprl.config import LossConfig, MisCorrection, OrchestratorConfig, TisCorrection
from looprl.envs.types import TRUNCATED_REASONS
from looprl.inspector import queries
from looprl.inspector.analysis_types import (
    BaselineMember,
    CallTokens,
    GroupBaseline,
    RewardExplanation,
    RewardTerm,
    TokenView,
)
from looprl.inspector.api import run_ref
from looprl.inspector.catalog import RunRef
from looprl.inspector.tokens import TokenDecoder
from looprl.session.advantages import EPS, group_advantages, masked_truncated
from looprl.session.rewards import mean_std, run_reward_rule
from looprl.store.records import ModelCall

router = APIRouter(prefix="/api")


def decoder(request: Request) -> TokenDecoder:
    return request.app.state.token_decoder


def head(conn: Any, ref: RunRef, rollout_id: str) -> dict[str, Any]:
    found = queries.rollout_head(conn, ref.run_id, rollout_id)
    if found is None:
        raise HTTPException(404, f"no rollout {rollout_id!r} in run {ref.id!r}")
    return found


@router.get("/runs/{run_id}/rollouts/{rollout_id}/explain", response_model=RewardExplanation)
def explain(rollout_id: str, ref: RunRef = Depends(run_ref)) -> RewardExplanation:
    """Each emitted component's value, weight and contribution, the total, and (train rollouts of `rl`
    runs) the group baseline the advantage follows from."""
    with ref.source.connection() as conn:
        row = head(conn, ref, rollout_id)
        kind, _, config = queries.run_config(conn, ref.run_id)
        members = queries.group_members(conn, row["group_id"]) if kind == "rl" and row["split"] == "train" else []
    rule = run_reward_rule(kind, config)
    weights = dict(rule.reward_weights)
    terms = [RewardTerm(name=k, value=v, weight=weights.get(k, 1.0), contribution=weights.get(k, 1.0) * v)
             for k, v in row["rewards"].items()]
    return RewardExplanation(weights=weights, weights_configured=bool(weights), terms=terms, total=row["reward"],
                             baseline=baseline(row, members, rule) if members else None)


def baseline(row: dict[str, Any], members: list[tuple[str, str, float | None, float | None]],
             rule: OrchestratorConfig) -> GroupBaseline:
    """The group's rewards as stored (failures already 0 under `include_failed`), through `group_advantages` (and
    `masked_truncated` under the run's `mask_truncated`, as the orchestrator took them)."""
    normalize, include_failed = rule.normalize_std, rule.include_failed
    rewards = [reward for _, _, reward, _ in members]
    adv = group_advantages(rewards, normalize)
    if rule.mask_truncated:
        adv = masked_truncated([reason for _, reason, _, _ in members], adv)
    mean, std = mean_std([r for r in rewards if r is not None])
    mine = next(a for (rid, *_), a in zip(members, adv.advantages) if rid == row["rollout_id"])
    return GroupBaseline(
        members=[BaselineMember(rollout_id=rid, reward=reward, counted=reward is not None, advantage=stored)
                 for rid, _, reward, stored in members],
        mean=None if math.isnan(mean) else mean, std=None if math.isnan(std) else std, normalize_std=normalize,
        include_failed=include_failed, eps=EPS, skipped=adv.skipped, advantage=None if adv.skipped else mine)


@router.get("/runs/{run_id}/rollouts/{rollout_id}/tokens", response_model=TokenView)
def tokens(rollout_id: str, ref: RunRef = Depends(run_ref), dec: TokenDecoder = Depends(decoder)) -> TokenView:
    """Every model call's completion tokens, sampler logprobs and the policy version that sampled each,
    whether the loss trained on them, and the trainer's logprobs when the store holds them."""
    with ref.source.connection() as conn:
        row = head(conn, ref, rollout_id)
        kind, model, config = queries.run_config(conn, ref.run_id)
        calls = queries.model_call_tokens(conn, rollout_id)
    correction = run_correction(config)
    trained, why = trained_why(kind, row, run_reward_rule(kind, config).mask_truncated)
    source, texts = dec.decode(model, [c["token_ids"] or [] for c in calls])
    out = []
    for k, c in enumerate(calls):
        call = ModelCall(rollout_id=rollout_id, idx=c["idx"], started_at=0.0, latency_s=0.0, status=c["status"],
                         prompt_token_ids=[] if c["has_prompt_ids"] else None, completion_token_ids=c["token_ids"],
                         completion_logprobs=c["logprobs"])
        out.append(CallTokens(idx=c["idx"], status=c["status"], finish_reason=c["finish_reason"],
                              token_ids=c["token_ids"] or [], texts=texts[k] if texts else None, logprobs=c["logprobs"],
                              policy_versions=c["policy_versions"], trainer_logprobs=c["trainer_logprobs"],
                              trained=trained and call.trainable,
                              correction_weights=correction_weights(correction, c["trainer_logprobs"], c["logprobs"])))
    return TokenView(tokenizer=source, trained=trained, why=why, calls=out,
                     trainer_logprobs_recorded=any(c.trainer_logprobs is not None for c in out))


def run_correction(config: dict[str, Any]) -> TisCorrection | MisCorrection | None:
    """The rollout correction an rl run's config used (`trainer.loss.correction`), if any."""
    correction = config.get("trainer", {}).get("loss", {}).get("correction")
    return LossConfig(correction=correction).correction if correction else None


def correction_weights(correction: TisCorrection | MisCorrection | None, trainer: list[float] | None,
                       sampler: list[float] | None) -> list[float] | None:
    if correction is None or trainer is None or sampler is None or len(trainer) != len(sampler):
        return None
    return correction.weights([t - s for t, s in zip(trainer, sampler)])


def trained_why(kind: str, row: dict[str, Any], masks_truncated: bool = False) -> tuple[bool, str]:
    """Whether the rollout's completions entered the loss, and why (not); `masks_truncated`: the run's
    `orchestrator.mask_truncated`."""
    if kind != "rl":
        return False, "an eval run: nothing trains"
    if row["split"] != "train":
        return False, "an eval rollout: scored, never trained"
    if row["advantage"] is None:
        if row["reward"] is None:
            return False, "not scored (an operational failure) and failures are not counted"
        cut = masks_truncated and row["termination_reason"] in TRUNCATED_REASONS
        if cut and row["trained_siblings"]:
            return False, (f"cut off by a length limit ({row['termination_reason']}): orchestrator.mask_truncated "
                           "leaves it out of the loss, its reward still in the group's baseline")
        return False, ("no advantage: its group had no signal (all rewards equal), came too far off-policy, "
                       + ("every reply with a signal was cut off by a length limit (orchestrator.mask_truncated), "
                          if cut else "") + "or collapse recovery rolled the weights back at its step")
    return True, f"trained with advantage {row['advantage']:.4g} (calls with token ids and logprobs)"


@router.get("/runs/{run_id}/rollouts/{rollout_id}/replies", response_model=dict[str, str])
def replies(rollout_id: str, ref: RunRef = Depends(run_ref)) -> dict[str, str]:
    """The start of each sibling's final reply, by rollout id."""
    with ref.source.connection() as conn:
        return queries.final_replies(conn, head(conn, ref, rollout_id)["group_id"])
