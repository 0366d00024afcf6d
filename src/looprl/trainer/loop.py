"""The trainer process: the RL loop's learning side, read top to bottom.

For each step N (from 1): wait for the orchestrator's `steps/step_N/batch.json`, take one optimizer
step on it (token-level policy gradient with importance ratios against the engine's logprobs, see
`trainer.step`), broadcast the new weights to `broadcasts/step_N/` (the orchestrator loads them into
the engine), write a checkpoint every `checkpoint_interval` steps and after the last, and report the
step's metrics in `steps/step_N/trainer.json`. The report comes last, so when the orchestrator reads
it the broadcast is already stable.

`resume_step` k > 0 restores checkpoint k (weights, optimizer, scheduler, RNGs), makes sure
`broadcasts/step_k/` exists (the orchestrator puts the engine on it) and continues at k+1. With
`[trainer.lora]` the policy trains adapters; broadcasts carry the merged weights for the embedded
engine, the adapters alone for vLLM (which loads them at run time).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from looprl.launch.config import RLConfig
from looprl.launch.handoff import TrainBatch, TrainerReport, wait_model, write_model
from looprl.store.paths import batch_path, broadcast_dir, trainer_report_path
from looprl.trainer.broadcast import broadcast_weights, is_stable
from looprl.trainer.checkpoint import load_checkpoint, save_checkpoint
from looprl.trainer.lora import add_lora, servable
from looprl.trainer.loss import select
from looprl.trainer.model import load_policy
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.step import train_step
from looprl.utils.logger import get_logger


def run(cfg: RLConfig, run_dir: Path, resume_step: int = 0) -> None:
    log, tcfg = get_logger(), cfg.trainer
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_policy(cfg.model.name, tcfg.dtype)
    if tcfg.lora is not None:
        model = add_lora(model, tcfg.lora)
    ref_model = load_policy(cfg.model.name, tcfg.dtype)[0].eval() if tcfg.loss.kl_coef > 0 else None
    optimizer = build_optimizer(model, tcfg.optim.lr, tcfg.optim.weight_decay, tcfg.optim.betas)
    scheduler = build_scheduler(optimizer, tcfg.optim.warmup_steps)
    adapters_only = cfg.inference.backend == "vllm"
    if resume_step:
        load_checkpoint(run_dir, resume_step, model, optimizer, scheduler)
        if not is_stable(broadcast_dir(run_dir, resume_step)):  # the engine resumes from this broadcast
            broadcast_weights(run_dir, resume_step, servable(model, adapters_only), keep=tcfg.keep_broadcasts)
        log.info("resumed from checkpoint step {}", resume_step)
    token_loss, normalize = select.token_loss(tcfg.loss), select.normalize(tcfg.loss)

    for step in range(resume_step + 1, cfg.max_steps + 1):
        started = time.perf_counter()
        batch = wait_model(batch_path(run_dir, step), TrainBatch)
        waited = time.perf_counter() - started
        metrics = train_step(model, optimizer, scheduler, batch.micro_batches, token_loss, normalize,
                             tcfg.optim.max_grad_norm, ref_model, tcfg.loss.kl_coef)
        broadcast_start = time.perf_counter()
        broadcast_weights(run_dir, step, servable(model, adapters_only), keep=tcfg.keep_broadcasts)
        metrics["broadcast_time_s"] = time.perf_counter() - broadcast_start
        if (tcfg.checkpoint_interval and step % tcfg.checkpoint_interval == 0) or step == cfg.max_steps:
            save_checkpoint(run_dir, step, model, tokenizer, optimizer, scheduler, batch.progress)
        metrics["wait_time_s"] = waited
        write_model(trainer_report_path(run_dir, step), TrainerReport(step=step, metrics=metrics))
        log.info("step {} | loss {:.4f} entropy {:.3f} mismatch_kl {:.2e} grad_norm {:.3f} lr {:.1e} | "
                 "{:.0f} tokens in {} micro-batches, {:.0f} tok/s | train {:.1f}s wait {:.1f}s broadcast {:.1f}s",
                 step, metrics["loss"], metrics["entropy"], metrics["mismatch_kl"], metrics["grad_norm"], metrics["lr"],
                 metrics["tokens"], int(metrics["micro_batches"]), metrics["train_tokens_per_s"],
                 metrics["train_time_s"], waited, metrics["broadcast_time_s"])
