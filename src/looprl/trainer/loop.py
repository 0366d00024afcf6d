"""The trainer process: the RL loop's learning side, read top to bottom.

For each step N (from 1): wait for the orchestrator's `steps/step_N/batch.json`, take one optimizer
step on it (token-level policy gradient with importance ratios against the engine's logprobs, see
`trainer.step`), broadcast the new weights to `broadcasts/step_N/` (the orchestrator loads them into
the engine), report the step's metrics and every loss token's logprob per rollout
(`trainer.rollout_logprobs`) in `steps/step_N/trainer.json`, then write a checkpoint when
one is due (`trainer.checkpoint`: kept every `interval` steps and after the last; otherwise a
resumable state every `resume_every_s` seconds). The report comes after the broadcast, so when the
orchestrator reads it the broadcast is already stable, and before the checkpoint, so a checkpoint
never exists without its step's report.

With several ranks (torchrun) every rank runs this loop on its share of each batch (`trainer.parallel`);
rank 0 alone writes broadcasts, reports and the checkpoint's files.

`resume_step` k > 0 restores checkpoint k (weights, optimizer, scheduler, RNGs), makes sure
`broadcasts/step_k/` exists (the orchestrator puts the engine on it) and continues at k+1. With
`[trainer.lora]` the policy trains adapters; broadcasts carry the merged weights for the embedded
engine, the adapters alone for vLLM (`inference.backend = "vllm"`, which loads them at run time).
With `[orchestrator.collapse] method = "rollback"`, or `temperature` with `escalate`, which escalates to it, the
trainer keeps a copy of the weights that sampled the last batch whose groups mostly had signal and, given a
batch marked `rollback`, goes back to them at a lower learning rate instead of training on it
(`trainer.rollback`).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from looprl.config import RLConfig
from looprl.device import attention_kernel, kernel_contract_from_env
from looprl.handoff import TrainBatch, TrainerReport, is_stable, wait_model, write_model
from looprl.paths import batch_path, broadcast_dir, trainer_report_path
from looprl.trainer import parallel
from looprl.trainer.broadcast import Broadcaster, broadcast_dtype
from looprl.trainer.checkpoint import (
    load_trainer_state,
    load_weights,
    prune_checkpoints,
    save_checkpoint,
)
from looprl.trainer.lora import add_lora
from looprl.trainer.loss import select
from looprl.trainer.model import as_reference, load_policy
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.rollback import Rollback
from looprl.trainer.rollout_logprobs import RolloutLogprobs
from looprl.trainer.step import train_step
from looprl.trainer.weight_files import full_state_dict
from looprl.utils.logger import get_logger


def run(cfg: RLConfig, run_dir: Path, resume_step: int = 0, weights_region: Path | None = None) -> None:
    """`weights_region`: the run's shared-memory region directory (the launcher's, with
    `trainer.weight_handoff = "shared_memory"`): broadcasts go through it instead of files."""
    log, tcfg, ccfg = get_logger(), cfg.trainer, cfg.trainer.checkpoint
    # vLLM hot-loads adapters (the base model is then never gathered); the embedded engine needs them merged
    adapter_only = cfg.inference.backend == "vllm" and tcfg.lora is not None
    ranks = parallel.setup(tcfg.device, tcfg.dtype, tcfg.dist_timeout_s)
    dtype = broadcast_dtype(cfg.inference.dtype, ranks)
    kernel = attention_kernel(tcfg.attention, ranks.device)
    log.info("trainer rank {} of {} on {} ({}, {})", ranks.rank, ranks.world_size, ranks.device, ranks.compute_dtype,
             kernel)
    kernel_contract_from_env(ranks.compute_dtype, "trainer")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if ranks.on_meta:
        log.info("rank {} builds its models on the meta device; rank 0 loads the weights and sends each rank its "
                 "shards", ranks.rank)
    model, tokenizer = load_policy(cfg.model.name, kernel, on_meta=ranks.on_meta)
    if tcfg.lora is not None:
        model = add_lora(model, tcfg.lora)
    if resume_step and not ranks.on_meta:  # the other ranks get rank 0's weights as it is sharded
        load_weights(run_dir, resume_step, model)
    model = parallel.prepare(model, ranks, compile=tcfg.compile, activation_checkpointing=tcfg.activation_checkpointing)
    broadcast = Broadcaster(run_dir, tcfg.keep_broadcasts, adapter_only, dtype,
                            weights_region if ranks.is_main else None)
    broadcast.attach(model, ranks)
    ref_model = None
    if tcfg.loss.kl_coef > 0:
        reference, _ = load_policy(cfg.model.name, kernel, on_meta=ranks.on_meta)
        ref_model = parallel.prepare(as_reference(reference), ranks)
    optimizer = build_optimizer(model, tcfg.optim.lr, tcfg.optim.weight_decay, tcfg.optim.betas, tcfg.optim.eps)
    scheduler = build_scheduler(optimizer, tcfg.optim.warmup_steps, tcfg.optim.schedule, cfg.max_steps,
                                tcfg.optim.min_lr_ratio)
    broadcast.guard(optimizer)
    if resume_step:
        _, with_optimizer = load_trainer_state(run_dir, resume_step, model, optimizer, scheduler, ranks)
        if not with_optimizer:
            log.warning("checkpoint {} holds no optimizer state (trainer.checkpoint.final_optimizer = false): "
                        "AdamW starts afresh", resume_step)
        if not is_stable(broadcast_dir(run_dir, resume_step)):  # the engine resumes from this broadcast
            state = full_state_dict(model, ranks, adapter_only)
            if state is not None:
                broadcast(resume_step, model, state)
            ranks.barrier()
        log.info("resumed from checkpoint step {}", resume_step)
    token_loss, normalize = select.token_loss(tcfg.loss), select.normalize(tcfg.loss)
    correction = select.rollout_correction(tcfg.loss)
    recovery = cfg.orchestrator.recovery
    rollback = (Rollback(model, recovery.lr_factor, recovery.rollback_to == "explored")
                if recovery is not None and recovery.keeps_weights else None)

    def is_kept(step: int) -> bool:
        return (ccfg.interval > 0 and step % ccfg.interval == 0) or step == cfg.max_steps

    last_checkpoint = time.monotonic()
    for step in range(resume_step + 1, cfg.max_steps + 1):
        started = time.perf_counter()
        batch = wait_model(batch_path(run_dir, step), TrainBatch)
        waited = time.perf_counter() - started
        if rollback is not None and rollback.before_step(batch, optimizer, scheduler, broadcast.begin_change):
            log.warning("step {}: collapse recovery, weights back to {}, AdamW's momentum zeroed, learning rate now "
                        "{:.2e}", step, "the last kept (sampled a step whose groups mostly had signal)"
                        if rollback.follow_explored else "the run's first", optimizer.param_groups[0]["lr"])
        collected = RolloutLogprobs()
        metrics = train_step(model, optimizer, scheduler, batch.micro_batches, token_loss, normalize,
                             tcfg.optim.max_grad_norm, ref_model, tcfg.loss.kl_coef, ranks, collected,
                             select.sequence_level(tcfg.loss), correction,
                             max(tcfg.loss.entropy_coef, batch.entropy_coef))
        rollout_logprobs = collected.gather(ranks)
        broadcast_start = time.perf_counter()
        state = full_state_dict(model, ranks, adapter_only)
        if state is not None:
            broadcast(step, model, state)
        metrics["broadcast_time_s"] = time.perf_counter() - broadcast_start
        metrics["wait_time_s"] = waited
        if rollout_logprobs is not None:  # rank 0
            write_model(trainer_report_path(run_dir, step),
                        TrainerReport(step=step, metrics=metrics, rollout_logprobs=rollout_logprobs))
        if is_kept(step) or time.monotonic() - last_checkpoint >= ccfg.resume_every_s:
            with broadcast.unchanged(step):
                save_checkpoint(run_dir, step, model, tokenizer, optimizer, scheduler, batch.progress, state=state,
                                ranks=ranks, with_optimizer=step < cfg.max_steps or ccfg.final_optimizer)
            if ranks.is_main:
                prune_checkpoints(run_dir, ccfg.keep, is_kept)
            last_checkpoint = time.monotonic()
        log.info("step {} | loss {:.4f} entropy {:.3f} mismatch_kl {:.2e} grad_norm {:.3f} lr {:.1e} | "
                 "{:.0f} tokens in {} micro-batches, {:.0f} tok/s | train {:.1f}s wait {:.1f}s broadcast {:.1f}s",
                 step, metrics["loss"], metrics["entropy"], metrics["mismatch_kl"], metrics["grad_norm"], metrics["lr"],
                 metrics["tokens"], int(metrics["micro_batches"]), metrics["train_tokens_per_s"],
                 metrics["train_time_s"], waited, metrics["broadcast_time_s"])
    parallel.teardown(ranks)
