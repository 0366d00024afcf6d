"""The trainer's output layer: logprobs and entropies of target tokens in float32, a chunk of tokens at a time.

The policy's `lm_head` turns each kept hidden state into logits over the whole vocabulary; the trainer
needs only the target token's logprob and the entropy. All logits at once in float32 are
tokens x vocabulary x 4 bytes, several copies through log_softmax and its backward: ~10 GB per copy at
16k loss tokens and Qwen's 152k vocabulary. `LogprobHead` replaces `lm_head` (same weight, so a tied
embedding stays tied and the state dict's keys do not change) and computes, `CHUNK_TOKENS` tokens at a
time, logits -> log-sum-exp -> the target's logprob and the entropy, keeping only the log-sum-exp for
the backward pass, which recomputes each chunk's logits. Peak memory is two chunk-sized tensors,
whatever the row's length. The entropy carries a gradient only when asked (`scoring(..., entropy_grad=True)`,
for the loss's entropy bonus): its backward then reuses the chunk's recomputed log-probabilities,
d entropy / d logits = -p * (log p + entropy), so the bonus costs no extra chunk-sized tensor; otherwise the
entropy is a metric and the backward pass is exactly the logprobs' own.

Everything here runs in float32 with autocast off, from float32 weights (`parallel` keeps the FSDP root,
which holds the lm_head, in float32): a bfloat16 lm_head adds logprob noise of ~1e-2 against the engine
(prime-rl keeps it in float32 too).

The target tokens travel beside the model's forward call (`LogprobHead.scoring`), since transformers
passes the head only the hidden states; within `scoring` the model's `logits` are `[1, N, 2]`: each
kept position's logprob (differentiable) and entropy (differentiable with `entropy_grad`). Outside it
the head returns plain float32 logits. Models that post-process logits after the head (Gemma's final
soft-capping) cannot use it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from looprl.errors import UserError

CHUNK_TOKENS = 512
"""Tokens per chunk: 512 x 152k vocabulary x 4 bytes = 0.3 GB per copy, two copies at most."""


class LogprobHead(torch.nn.Module):
    def __init__(self, weight: torch.nn.Parameter) -> None:
        super().__init__()
        self.weight = weight
        self._targets: torch.Tensor | None = None
        self._entropy_grad = False

    @contextlib.contextmanager
    def scoring(self, targets: torch.Tensor, entropy_grad: bool = False) -> Iterator[None]:
        """Within it, the model's `logits` are `[1, N, 2]` (logprob, entropy) of `targets` [N]; the entropy
        is differentiable with `entropy_grad`."""
        self._targets, self._entropy_grad = targets, entropy_grad
        try:
            yield
        finally:
            self._targets, self._entropy_grad = None, False

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        with torch.autocast(hidden.device.type, enabled=False):
            if self._targets is None:
                return torch.nn.functional.linear(hidden.float(), self.weight.float())
            logprobs, entropy = chunked_logprobs(hidden.reshape(-1, hidden.shape[-1]), self.weight, self._targets,
                                                 entropy_grad=self._entropy_grad)
        return torch.stack([logprobs, entropy], dim=-1).reshape(*hidden.shape[:-1], 2)


def logprob_head(model: Any) -> LogprobHead:
    """The model's `LogprobHead`, put in place of its `lm_head` on first use (`parallel.prepare` does it
    before sharding, as FSDP must see the module it shards)."""
    head = model.get_output_embeddings()
    if isinstance(head, LogprobHead):
        return head
    if getattr(model.config, "final_logit_softcapping", None) is not None:
        raise UserError(f"{type(model).__name__} soft-caps its logits after the lm_head; the trainer computes "
                        "logprobs inside the head and does not support it")
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        raise UserError(f"the trainer needs a bias-free linear lm_head, got {type(head).__name__}")
    new = LogprobHead(head.weight)
    model.set_output_embeddings(new)
    return new


def chunked_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                     chunk: int | None = None, entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`(logprobs [N], entropy [N])` of `targets` under `log_softmax(hidden @ weight.T)`, in float32,
    never holding more than `chunk` (default `CHUNK_TOKENS`) rows of logits; the logprobs are
    differentiable in `hidden` and `weight`, the entropy too with `entropy_grad`."""
    logprobs, entropy = _ChunkedLogprobs.apply(hidden.float(), weight.float(), targets, chunk or CHUNK_TOKENS,
                                               entropy_grad)
    return logprobs, entropy


class _ChunkedLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                chunk: int, entropy_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
        n = hidden.shape[0]
        logprobs, entropy, lse = (hidden.new_empty(n) for _ in range(3))
        for start in range(0, n, chunk):  # two [chunk, vocabulary] tensors at most: logits and probs
            rows = slice(start, start + chunk)
            logits = hidden[rows] @ weight.T
            top = logits.amax(-1, keepdim=True)
            probs = (logits - top).exp_()
            total = probs.sum(-1, keepdim=True)
            lse[rows] = (top + total.log()).squeeze(1)
            logprobs[rows] = logits.gather(1, targets[rows, None]).squeeze(1) - lse[rows]
            probs.div_(total)
            entropy[rows] = lse[rows] - (probs[:, None, :] @ logits[:, :, None]).reshape(-1)  # -sum p log p
        ctx.save_for_backward(hidden, weight, targets, lse, entropy)
        ctx.chunk, ctx.entropy_grad = chunk, entropy_grad
        if not entropy_grad:
            ctx.mark_non_differentiable(entropy)
        return logprobs, entropy

    @staticmethod
    def backward(ctx: Any, grad_logprobs: torch.Tensor, grad_entropy: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, targets, lse, entropy = ctx.saved_tensors
        grad_hidden = torch.zeros_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, hidden.shape[0], ctx.chunk):
                rows = slice(start, start + ctx.chunk)
                # d logprob / d logits = onehot(target) - softmax, scaled by the incoming gradient
                if ctx.entropy_grad:  # ... plus d entropy / d logits = -softmax * (log softmax + entropy)
                    log_probs = (hidden[rows] @ weight.T).sub_(lse[rows, None])
                    grad_logits = log_probs.exp()
                    scale = log_probs.add_(entropy[rows, None]).mul_(grad_entropy[rows, None])
                    grad_logits.mul_(scale.add_(grad_logprobs[rows, None])).neg_()
                else:
                    grad_logits = torch.exp(hidden[rows] @ weight.T - lse[rows, None]).mul_(-grad_logprobs[rows, None])
                grad_logits.scatter_add_(1, targets[rows, None], grad_logprobs[rows, None])
                if grad_hidden is not None:
                    grad_hidden[rows] = grad_logits @ weight
                if grad_weight is not None:
                    grad_weight.addmm_(grad_logits.T, hidden[rows])
        return grad_hidden, grad_weight, None, None, None
