"""The inspector's explaining endpoints: why a rollout got its reward and advantage, which tokens it
sampled and trained on, how its example fared over the run, where a search matched, and per-step
reward histograms.

Read-only, beside `looprl.inspector.api` (same `/api` prefix and run lookup). The advantage is
recomputed with the orchestrator's own `group_advantages`, from the run's resolved config, so the
page shows exactly the rule that produced the stored value.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from looprl.config import LossConfig, MisCorrection, OrchestratorConfig, TisCorrection
from looprl.inspector import queries
from looprl.inspector.api import run_ref
from looprl.inspector.catalog import RunRef
from looprl.inspector.explain_models import (
    BaselineMember,
    CallTokens,
    ExampleHistory,
    GroupBaseline,
    HistoryPoint,
    RewardExplanation,
    RewardHistogram,
    RewardTerm,
    Snippet,
    TokenView,
)
from looprl.inspector.tokens import TokenDecoder
from looprl.session.advantages import group_advantages
from looprl.session.rewards import mean_std, run_reward_rule
from looprl.store.records import ModelCall

router = APIRouter(prefix="/api")
EPS = 1e-6
"""`group_advantages`' default eps, which the orchestrator uses."""


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
    """The group's rewards as stored (failures already 0 under `include_failed`), through `group_advantages`."""
    normalize, include_failed = rule.normalize_std, rule.include_failed
    rewards = [reward for _, _, reward, _ in members]
    adv = group_advantages(rewards, normalize, EPS)
    mean, std = mean_std([r for r in rewards if r is not None])
    mine = next(a for (rid, *_), a in zip(members, adv.advantages) if rid == row["rollout_id"])
    return GroupBaseline(
        members=[BaselineMember(rollout_id=rid, reward=reward, counted=reward is not None, advantage=stored)
                 for rid, _, reward, stored in members],
        mean=None if math.isnan(mean) else mean, std=None if math.isnan(std) else std, normalize_std=normalize,
        include_failed=include_failed, eps=EPS, skipped=adv.skipped, advantage=None if adv.skipped else mine)


@router.get("/runs/{run_id}/rollouts/{rollout_id}/tokens", response_model=TokenView)
def tokens(rollout_id: str, ref: RunRef = Depends(run_ref), dec: TokenDecoder = Depends(decoder)) -> TokenView:
    """Every model call's completion tokens and sampler logprobs, whether the loss trained on them, and the
    trainer's logprobs when the store holds them."""
    with ref.source.connection() as conn:
        row = head(conn, ref, rollout_id)
        kind, model, config = queries.run_config(conn, ref.run_id)
        calls = queries.model_call_tokens(conn, rollout_id)
    correction = run_correction(config)
    trained, why = trained_why(kind, row)
    source, texts = dec.decode(model, [c["token_ids"] or [] for c in calls])
    out = []
    for k, c in enumerate(calls):
        call = ModelCall(rollout_id=rollout_id, idx=c["idx"], started_at=0.0, latency_s=0.0, status=c["status"],
                         prompt_token_ids=[] if c["has_prompt_ids"] else None, completion_token_ids=c["token_ids"],
                         completion_logprobs=c["logprobs"])
        out.append(CallTokens(idx=c["idx"], status=c["status"], finish_reason=c["finish_reason"],
                              token_ids=c["token_ids"] or [], texts=texts[k] if texts else None, logprobs=c["logprobs"],
                              trainer_logprobs=c["trainer_logprobs"], trained=trained and call.trainable,
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


def trained_why(kind: str, row: dict[str, Any]) -> tuple[bool, str]:
    """Whether the rollout's completions entered the loss, and why (not)."""
    if kind != "rl":
        return False, "an eval run: nothing trains"
    if row["split"] != "train":
        return False, "an eval rollout: scored, never trained"
    if row["advantage"] is None:
        return False, ("not scored (an operational failure) and failures are not counted" if row["reward"] is None
                       else "no advantage: its group had no signal (all rewards equal) or came too far off-policy")
    return True, f"trained with advantage {row['advantage']:.4g} (calls with token ids and logprobs)"


@router.get("/runs/{run_id}/rollouts/{rollout_id}/replies", response_model=dict[str, str])
def replies(rollout_id: str, ref: RunRef = Depends(run_ref)) -> dict[str, str]:
    """The start of each sibling's final reply, by rollout id."""
    with ref.source.connection() as conn:
        return queries.final_replies(conn, head(conn, ref, rollout_id)["group_id"])


@router.get("/runs/{run_id}/examples/{example_id}/history", response_model=ExampleHistory)
def history(example_id: str, ref: RunRef = Depends(run_ref)) -> ExampleHistory:
    """The example's mean reward at every step it was sampled, per split, with a few of its rollouts."""
    with ref.source.connection() as conn:
        rows = queries.example_points(conn, ref.run_id, example_id)
    points: dict[tuple[str, int], list[tuple[str, float | None]]] = {}
    for split, step, rollout_id, reward in rows:
        points.setdefault((split, step), []).append((rollout_id, reward))
    out = []
    for (split, step), items in points.items():
        scored = [r for _, r in items if r is not None]
        out.append(HistoryPoint(split=split, step=step, rollouts=len(items), scored=len(scored),
                                mean_reward=sum(scored) / len(scored) if scored else None,
                                rollout_ids=[rid for rid, _ in items[:8]]))
    return ExampleHistory(example_id=example_id, points=out)


@router.get("/runs/{run_id}/snippets", response_model=dict[str, Snippet])
def snippets(q: str = Query(..., min_length=1), ids: list[str] = Query(..., max_length=500),
             ref: RunRef = Depends(run_ref)) -> dict[str, Snippet]:
    """For each of `ids`, the text the search `q` matched in, cut around the match."""
    with ref.source.connection() as conn:
        found = queries.snippets(conn, ids, q.strip())
    n, c = len(q.strip()), queries.SNIPPET_CONTEXT
    return {rid: Snippet(where=where, before=("…" if at > c else "") + text[max(0, at - c):at], match=text[at:at + n],
                         after=text[at + n:at + n + c] + ("…" if at + n + c < len(text) else ""))
            for rid, (where, text, at) in found.items()}


class HistogramCache:
    """Reward histograms per (run, split), recomputed when the split's rollout count changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, int], tuple[int, RewardHistogram]] = {}

    def get(self, ref: RunRef, split: str, bins: int) -> RewardHistogram:
        with ref.source.connection() as conn:
            count = conn.execute("SELECT COUNT(*) FROM rollouts WHERE run_id=? AND split=?",
                                 (ref.run_id, split)).fetchone()[0]
            key = (ref.id, split, bins)
            with self._lock:
                hit = self._cache.get(key)
            if hit and hit[0] == count:
                return hit[1]
            lo, hi, counts = queries.reward_histogram(conn, ref.run_id, split, bins)
        steps = sorted(counts)
        value = RewardHistogram(lo=lo, hi=hi, bins=bins, steps=steps, counts=[counts[s] for s in steps])
        with self._lock:
            self._cache[key] = (count, value)
        return value


@router.get("/runs/{run_id}/reward_histogram", response_model=RewardHistogram)
def reward_histogram(request: Request, split: Literal["train", "eval"] = "train", bins: int = Query(12, ge=2, le=50),
                     ref: RunRef = Depends(run_ref)) -> RewardHistogram:
    """How the split's rewards spread at each step."""
    return request.app.state.histograms.get(ref, split, bins)
