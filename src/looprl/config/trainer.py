"""The trainer's configuration (the `[trainer]` table of an rl config). Pydantic only, no torch.

Loss variants are a discriminated union on `type`, so each variant lists only its own settings.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from looprl.config.base import Strict


class ClippedLoss(Strict):
    """PPO-style clipped ratio (GRPO; `eps_high > eps_low` is DAPO's clip-higher)."""

    type: Literal["clipped"] = "clipped"
    """Selects this objective."""
    eps_low: float = Field(0.2, ge=0)
    """The ratio is clipped from below at 1 - eps_low."""
    eps_high: float = Field(0.2, ge=0)
    """The ratio is clipped from above at 1 + eps_high (above eps_low: DAPO's clip-higher)."""


class TruncatedLoss(Strict):
    """REINFORCE with the importance weight truncated at `cap` (TIS)."""

    type: Literal["truncated"] = "truncated"
    """Selects this objective (the default)."""
    cap: float = Field(2.0, gt=0)
    """The policy gradient of each token is weighted by min(ratio, cap)."""


class MaskedLoss(Strict):
    """The importance-weighted gradient, with tokens whose ratio is outside [low, high] masked out."""

    type: Literal["masked"] = "masked"
    """Selects this objective."""
    low: float = Field(0.5, ge=0)
    """Tokens whose ratio is below this carry no gradient."""
    high: float = Field(2.0, gt=0)
    """Tokens whose ratio is above this carry no gradient."""


class CispoLoss(Strict):
    """CISPO: the importance weight clipped to [low, high] as a constant, every token keeps its gradient:
    per_token = -clip(ratio, low, high).detach() * A * logp (`low` 0 and `high` = cap is `truncated`)."""

    type: Literal["cispo"] = "cispo"
    """Selects this objective."""
    low: float = Field(0.0, ge=0)
    """Lower bound of the weight (0: none, as MiniMax-M1 and TRL)."""
    high: float = Field(5.0, gt=0)
    """Upper bound of the weight (ScaleRL's and TRL's recommended 5)."""


class GspoLoss(Strict):
    """GSPO: one ratio per sequence, s = exp(mean of the sequence's token log ratios), PPO-clipped per
    sequence: per_token = -min(s * A, clip(s, 1 - eps_low, 1 + eps_high) * A). The paper pairs it with
    `normalization = "per_sequence"`."""

    type: Literal["gspo"] = "gspo"
    """Selects this objective."""
    eps_low: float = Field(3e-4, ge=0)
    """Lower clip range of the sequence ratio (the paper's 3e-4: a geometric mean moves little)."""
    eps_high: float = Field(4e-4, ge=0)
    """Upper clip range of the sequence ratio (the paper's 4e-4)."""


def _ratios(log_rhos: list[float], level: str) -> list[float]:
    """Each token's rho: its own ratio, or at sequence level the product over the sequence."""
    return [math.exp(sum(log_rhos))] * len(log_rhos) if level == "sequence" else [math.exp(x) for x in log_rhos]


class TisCorrection(Strict):
    """Truncated IS rollout correction: each token's loss times w = min(rho, cap), rho = exp(logp_old -
    logp_engine) per token, or its product over the sequence at `level = "sequence"`."""

    type: Literal["tis"] = "tis"
    """Selects truncated importance sampling."""
    level: Literal["token", "sequence"] = "token"
    """One weight per token, or one per sequence (the product of its token ratios)."""
    cap: float = Field(2.0, gt=0)
    """The largest weight."""

    def weights(self, log_rhos: list[float]) -> list[float]:
        """The weight of each token of one sequence from its log ratios (the inspector's token view; the
        trainer computes the same on tensors, `trainer/loss/correction.py`)."""
        return [min(rho, self.cap) for rho in _ratios(log_rhos, self.level)]


class MisCorrection(Strict):
    """Masked IS rollout correction: w = rho inside [low, high], 0 outside (the token, or at `level =
    "sequence"` the whole sequence, drops out of the loss)."""

    type: Literal["mis"] = "mis"
    """Selects masked importance sampling."""
    level: Literal["token", "sequence"] = "token"
    """One weight per token, or one per sequence (the product of its token ratios)."""
    low: float = Field(0.5, ge=0)
    """Tokens (or sequences) whose ratio is below this drop out of the loss."""
    high: float = Field(2.0, gt=0)
    """Tokens (or sequences) whose ratio is above this drop out of the loss."""

    def weights(self, log_rhos: list[float]) -> list[float]:
        """As `TisCorrection.weights`: rho inside [low, high], else 0."""
        return [rho if self.low <= rho <= self.high else 0.0 for rho in _ratios(log_rhos, self.level)]


class LossConfig(Strict):
    """The policy-gradient objective: a per-token ratio variant, its normalisation, an optional KL penalty."""

    ratio: ClippedLoss | TruncatedLoss | MaskedLoss | CispoLoss | GspoLoss = Field(
        default_factory=TruncatedLoss, discriminator="type")
    """The objective (`type`: truncated, clipped, masked, cispo, gspo; formulas in `trainer/loss/`).
    Truncated by default: at one step of off-policy lag, PPO's clip around the sampling policy zeroes
    the gradient of the tokens the previous step just moved, so each step moved the policy about half
    as far (docs/benchmarks.md, "One step of off-policy lag")."""
    normalization: Literal["per_token", "per_sequence", "constant"] = "per_token"
    """How the step's token losses are averaged: `per_token` (DAPO) weighs every loss token of the step the
    same; `per_sequence` (GRPO) averages each sequence, then the sequences; `constant` (Dr. GRPO) divides
    by `normalization_constant`, so the loss scale does not follow the sampled lengths."""
    normalization_constant: float | None = Field(None, gt=0)
    """The denominator of `constant` normalisation, e.g. sequences per step * max completion tokens."""
    kl_coef: float = Field(0.0, ge=0)
    """Weight of the KL penalty to the initial model; 0 (the default) loads no reference model."""
    entropy_coef: float = Field(0.0, ge=0)
    """Entropy bonus: loss -= entropy_coef * the policy's entropy (over the whole vocabulary) at each loss
    token, averaged by `normalization` like the policy loss, so a policy whose replies all become alike is
    pushed to keep exploring. Like the policy loss, it trains only the groups with signal (docs/training.md,
    "Losses"). 0 (the default): no bonus, and no entropy gradient is computed."""
    correction: TisCorrection | MisCorrection | None = Field(None, discriminator="type")
    """Rollout correction (`[trainer.loss.correction]`, `type` tis or mis), separate from the objective:
    the objective's ratio is then taken against the trainer's own logprobs before the update and each
    token's loss weighted by the correction for the engine's mismatch (`trainer/loss/correction.py`).
    None (the default): the objective's ratio against the engine's logprobs is the only correction."""

    @model_validator(mode="after")
    def _constant_needs_a_denominator(self) -> LossConfig:
        if self.normalization == "constant" and self.normalization_constant is None:
            raise ValueError("normalization = 'constant' needs normalization_constant")
        return self


class OptimConfig(Strict):
    """AdamW (fp32 state) with a linear warmup, an optional decay and gradient-norm clipping."""

    lr: float = Field(1e-6, gt=0)
    """Peak learning rate."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW's decoupled weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's (beta1, beta2)."""
    eps: float = Field(1e-8, gt=0)
    """AdamW's epsilon, added to the root of the second-moment estimate. A parameter whose gradients stay well
    below it moves by about lr * gradient / eps instead of about lr, so a larger eps keeps the many parameters
    with tiny gradients (most of a model's in an RL step) nearly still."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup: step k trains at lr * min(1, k / warmup_steps), so the first step already learns."""
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    """After the warmup: `constant` keeps lr; `linear` and `cosine` decay it (along a line, along half a cosine
    wave) to `min_lr_ratio * lr` at `max_steps`: after k steps past the warmup of W steps, p = k / (max_steps -
    W) and lr * (min_lr_ratio + (1 - min_lr_ratio) * (1 - p)), or * (1 + cos(pi * p)) / 2 for cosine."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Where `linear` and `cosine` end, as a share of lr."""
    max_grad_norm: float = Field(1.0, gt=0)
    """Gradients are clipped to this global norm before each update."""


class LoraConfig(Strict):
    """Low-rank adapters (peft) on the listed modules; the base weights stay frozen."""

    rank: int = Field(16, ge=1)
    """Rank r of each adapter."""
    alpha: float = Field(32.0, gt=0)
    """Scaling numerator: the update is (alpha / rank) * B @ A."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapters' input."""
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                               "up_proj", "down_proj"])
    """Names of the linear layers that get adapters."""


class CheckpointConfig(Strict):
    """`checkpoints/step_N/`: kept checkpoints every `interval` steps and after the last, plus one
    resumable state that each newer one replaces, so `--resume` works after any crash."""

    interval: int = Field(0, ge=0)
    """Keep a checkpoint every N steps (0: only after the last step)."""
    keep: int = Field(1, ge=1)
    """Kept checkpoints on disk, newest first (older ones are deleted)."""
    resume_every_s: float = Field(300.0, ge=0)
    """Also write a resumable state when this many seconds have passed since the last checkpoint
    (0: after every step); it replaces the previous one, so a crash loses at most this interval."""
    final_optimizer: bool = True
    """The last step's checkpoint holds the optimizer state too (then `--resume --max_steps M` extends
    the run exactly); false: weights only, a third of the bytes, and an extended run restarts AdamW.
    Every other checkpoint keeps it: it exists to resume."""


class TrainerConfig(Strict):
    """The trainer process: computes the loss on the orchestrator's batches and publishes new weights."""

    optim: OptimConfig = Field(default_factory=OptimConfig)
    """The optimizer."""
    loss: LossConfig = Field(default_factory=LossConfig)
    """The objective."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the trainer computes: `auto` is CUDA when present, else the CPU."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Compute dtype (`auto`: bfloat16 on CUDA, float32 on the CPU). Weights and optimizer state stay
    float32 (master weights); bfloat16 runs the decoder layers' forward and backward passes through FSDP2's
    mixed-precision policy (bfloat16 layer parameters, float32 gradient reduction), on a one-rank process
    group when the trainer is one process, so q, k and v reach the attention kernel in bfloat16 alike; the
    lm_head and the logprobs stay float32. The same on the CPU as on a GPU."""
    attention: Literal["auto", "sdpa", "flex_attention"] = "auto"
    """Attention kernel of the trainer's passes (`auto`: flex_attention on CUDA, sdpa elsewhere).
    `flex_attention` computes prompt trees under a block mask (no dense T x T mask; long packed rows
    fit); `sdpa` under a dense boolean mask. The CPU runs flex_attention too, except in passes that need
    gradients: torch has no flex_attention backward on the CPU, so those run sdpa with the same mask."""
    compile: bool = False
    """`torch.compile` each decoder layer."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (less memory, ~30% more compute)."""
    world_size: int = Field(1, ge=1)
    """Trainer ranks on the CPU (gloo, under torchrun). On GPUs `[deployment].trainer_gpus` (or
    `[slurm]`) sets the ranks, one per GPU."""
    dist_timeout_s: float = Field(3600.0, gt=0)
    """Timeout of the ranks' collectives (the NCCL/gloo process group's; torch's default is 10 minutes). Rank 0
    alone gathers the weights and writes each broadcast and checkpoint while the others wait at the next
    collective: a large model on a network filesystem can take longer than 10 minutes."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    """What `checkpoints/` keeps."""
    keep_broadcasts: int = Field(2, ge=1)
    """Weight broadcasts kept on disk (older ones are deleted)."""
    weight_handoff: Literal["auto", "shared_memory", "file"] = "auto"
    """How each step's weights reach the engine. `file`: a safetensors file per step under `broadcasts/`
    (what vLLM, SLURM jobs and engines on other hosts need). `shared_memory`: the embedded engine on this
    host copies them from a region in `/dev/shm` the trainer keeps them in, no file written or read.
    `auto` (the default): `shared_memory` when `looprl rl` starts the embedded engine itself on Linux,
    `file` otherwise; the resolved value is written into the run's config.toml."""
    lora: LoraConfig | None = None
    """Train LoRA adapters instead of every weight (`[trainer.lora]`); None (the default): full fine-tuning."""
