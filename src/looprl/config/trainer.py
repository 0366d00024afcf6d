"""The trainer's configuration (the `[trainer]` table of an rl config). Pydantic only, no torch.

Loss variants are a discriminated union on `type`, so each variant lists only its own settings.
"""

from __future__ import annotations

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


class LossConfig(Strict):
    """The policy-gradient objective: a per-token ratio variant, its normalisation, an optional KL penalty."""

    ratio: ClippedLoss | TruncatedLoss | MaskedLoss = Field(default_factory=TruncatedLoss, discriminator="type")
    """The per-token objective. Truncated by default: at one step of off-policy lag, PPO's clip around the
    sampling policy zeroes the gradient of the tokens the previous step just moved, so each step moved
    the policy about half as far (docs/benchmarks.md, "One step of off-policy lag")."""
    normalization: Literal["per_token", "per_sequence", "constant"] = "per_token"
    """How the step's token losses are averaged: `per_token` (DAPO) weighs every loss token of the step the
    same; `per_sequence` (GRPO) averages each sequence, then the sequences; `constant` (Dr. GRPO) divides
    by `normalization_constant`, so the loss scale does not follow the sampled lengths."""
    normalization_constant: float | None = Field(None, gt=0)
    """The denominator of `constant` normalisation, e.g. sequences per step * max completion tokens."""
    kl_coef: float = Field(0.0, ge=0)
    """Weight of the KL penalty to the initial model; 0 (the default) loads no reference model."""

    @model_validator(mode="after")
    def _constant_needs_a_denominator(self) -> LossConfig:
        if self.normalization == "constant" and self.normalization_constant is None:
            raise ValueError("normalization = 'constant' needs normalization_constant")
        return self


class OptimConfig(Strict):
    """AdamW (fp32 state) with a linear warmup and gradient-norm clipping."""

    lr: float = Field(1e-6, gt=0)
    """Peak learning rate."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW's decoupled weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's (beta1, beta2)."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup: step k trains at lr * min(1, k / warmup_steps), so the first step already learns."""
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
    float32 (master weights); bfloat16 runs the decoder layers' forward and backward passes (autocast, or
    FSDP2's mixed precision); the lm_head and the logprobs stay float32."""
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
    lora: LoraConfig | None = None
    """Train LoRA adapters instead of every weight (`[trainer.lora]`); None (the default): full fine-tuning."""
