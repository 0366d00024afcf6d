"""One optimizer step on a training batch, read top to bottom.

1. Normalisation weights for the whole step, from every sequence's loss mask (so the result does not
   depend on how the orchestrator packed the micro-batches, nor on how many ranks share them).
2. For each of this rank's micro-batches (all of them with one process; `parallel.assign` with
   several): a teacher-forced pass (logprobs, entropy), the policy loss, backward; gradients
   accumulate (and FSDP reduces them over ranks).
3. Gradient clipping, AdamW step, learning-rate schedule step.

Metrics are means over the step's loss tokens: `entropy` of the policy, `mismatch_kl` (k3 estimate
of KL(inference || trainer) on the sampled tokens: ~0 when both run the same weights, growing with
kernel mismatch and off-policy lag), `clipped_frac`, plus `loss`, `grad_norm`, `lr` and throughput
(`tokens` are the tokens computed: a prompt shared by siblings counts once). With `sequence_level`
(GSPO) each sample's tokens share one ratio, their mean log ratio (`loss.gspo`). With a rollout
`correction` (`loss.correction`, TIS or MIS) the step also reports `is_truncated_frac`,
`is_masked_frac` (shares of loss tokens whose weight it truncated / masked) and `is_weight` (the
mean weight). `entropy_bonus` is what the entropy bonus (`entropy_coef`) took off the step's loss. Given a
`RolloutLogprobs`, the step also keeps the logprob of every loss token from those same passes, per
rollout, for the trainer's report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from looprl.handoff import MicroBatch, sample_segments
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.loss import TokenLoss, normalization, policy_loss
from looprl.trainer.loss.correction import Correction
from looprl.trainer.loss.kl import token_kl
from looprl.trainer.parallel import Ranks, all_sum, assign, full_value
from looprl.trainer.rollout_logprobs import RolloutLogprobs


def train_step(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    micro_batches: Sequence[MicroBatch],
    token_loss: TokenLoss,
    normalize: normalization.Normalization = normalization.per_token,
    max_grad_norm: float = 1.0,
    ref_model: Any | None = None,
    kl_coef: float = 0.0,
    ranks: Ranks | None = None,
    rollout_logprobs: RolloutLogprobs | None = None,
    sequence_level: bool = False,
    correction: Correction | None = None,
    entropy_coef: float = 0.0,
) -> dict[str, float]:
    start = time.perf_counter()
    ranks = ranks or Ranks()
    model.train()
    weights = step_weights(micro_batches, normalize)
    loss_tokens = sum(sum(mb.loss_mask) for mb in micro_batches)
    totals = {"loss": 0.0, "entropy": 0.0, "mismatch_kl": 0.0, "clipped_frac": 0.0, "ref_kl": 0.0,
              "entropy_bonus": 0.0, "is_truncated_frac": 0.0, "is_masked_frac": 0.0, "is_weight": 0.0}
    for i in rank_passes(micro_batches, ranks):
        padding = i is None  # a zero-weight pass: this rank has fewer micro-batches than the busiest
        mb = micro_batches[0 if i is None else i]
        w = torch.zeros(len(mb.loss_mask)) if i is None else weights[i]
        to = ranks.device
        ids, pos = torch.tensor(mb.token_ids, device=to), torch.tensor(mb.position_ids, device=to)
        mask = torch.tensor(mb.loss_mask, device=to)
        inference = torch.tensor(mb.inference_logprobs, device=to)
        logprobs, entropy = token_logprobs(model, ids, pos, mask, mb.trees, with_entropy=True,
                                           entropy_grad=entropy_coef > 0)
        ref = None
        if ref_model is not None:
            with torch.no_grad():
                ref, _ = token_logprobs(ref_model, ids, pos, mask, mb.trees)
        out = policy_loss(token_loss, logprobs, inference, torch.tensor(mb.advantages, device=to), w.to(to), ref,
                          kl_coef, sequence_ids(mb).to(to), sequence_level, correction, entropy, entropy_coef)
        (out.loss * ranks.world_size).backward()  # FSDP averages gradients over ranks; the step sums
        if padding:
            continue
        assert entropy is not None
        totals["loss"] += out.loss.item()
        totals["clipped_frac"] += out.clipped
        totals["ref_kl"] += out.kl
        totals["entropy_bonus"] += out.entropy_bonus
        totals["is_truncated_frac"] += out.truncated
        totals["is_masked_frac"] += out.masked
        totals["is_weight"] += out.correction_weight
        sampled = logprobs.detach()[mask]
        totals["entropy"] += float(entropy.detach()[mask].sum())
        totals["mismatch_kl"] += float(token_kl(inference[mask], sampled).sum())
        if rollout_logprobs is not None:
            rollout_logprobs.add(mb, sampled)
    totals = all_sum(totals, ranks)
    grad_norm = full_value(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    lr = float(optimizer.param_groups[0]["lr"])  # what this update uses (a rollback may have just lowered it)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    elapsed = time.perf_counter() - start
    tokens = sum(len(mb.token_ids) for mb in micro_batches)
    per_loss_token = max(loss_tokens, 1)
    corrections = {k: totals[k] / per_loss_token for k in ("is_truncated_frac", "is_masked_frac", "is_weight")}
    return ({} if correction is None else corrections) | {
        "loss": totals["loss"],
        "entropy": totals["entropy"] / per_loss_token,
        "mismatch_kl": totals["mismatch_kl"] / per_loss_token,
        "clipped_frac": totals["clipped_frac"] / per_loss_token,
        "ref_kl": totals["ref_kl"] / per_loss_token,
        "entropy_bonus": totals["entropy_bonus"],
        "grad_norm": grad_norm,
        "lr": lr,
        "tokens": float(tokens),
        "loss_tokens": float(loss_tokens),
        "micro_batches": float(len(micro_batches)),
        "train_time_s": elapsed,
        "train_tokens_per_s": tokens / elapsed,
    }


def rank_passes(micro_batches: Sequence[MicroBatch], ranks: Ranks) -> list[int | None]:
    """The micro-batch indices this rank computes, padded with None to the busiest rank's count."""
    if not ranks.distributed:
        return list(range(len(micro_batches)))
    shares = assign([len(mb.token_ids) for mb in micro_batches], ranks.world_size)
    mine: list[int | None] = list(shares[ranks.rank])
    return mine + [None] * (max(len(s) for s in shares) - len(mine))


def sequence_ids(mb: MicroBatch) -> torch.Tensor:
    """Each token's sample index in the row (0, 1, ...), -1 on tokens of no sample (a shared prompt)."""
    ids = torch.full((len(mb.token_ids),), -1, dtype=torch.long)
    for i, seg in enumerate(sample_segments(mb.trees)):
        ids[seg.start:seg.end] = i
    return ids


def step_weights(micro_batches: Sequence[MicroBatch], normalize: normalization.Normalization) -> list[torch.Tensor]:
    """Each micro-batch's per-token loss weights, normalised over every sequence of the step."""
    masks, spans = [], []
    for i, mb in enumerate(micro_batches):
        loss = torch.tensor(mb.loss_mask)
        for seg in sample_segments(mb.trees):
            masks.append(loss[seg.start:seg.end])
            spans.append((i, seg.start, seg.end))
    weights = [torch.zeros(len(mb.loss_mask)) for mb in micro_batches]
    for w, (i, start, end) in zip(normalize(masks), spans):
        weights[i][start:end] = w
    return weights

