"""Training samples from the model calls the gateway recorded for one rollout.

Multi-turn rollouts call the model several times. When a call's prompt token ids start with the
previous call's prompt + completion token ids (the usual chat loop: the transcript only grows), the
calls merge into one sequence: the new prompt tokens (the template's turn markers, tool results,
the user's next message) join without loss, the completion's tokens with loss. A call whose prompt
does not extend the sequence (the env rewrote the history, or the template re-rendered earlier
turns differently) starts a new sample. Each sample carries the rollout's advantage.

Calls without token ids or logprobs (a failed call, an upstream without vLLM's token extensions)
cannot be trained on and are left out; the next trainable call then starts a new sample.

So a rollout's loss tokens, its samples taken in order, are its trainable calls' completions one
after another (`loss_calls`): how the trainer's per-rollout logprobs are split back onto the calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from looprl.store.records import ModelCall


class TrainingSample(BaseModel):
    """One token sequence of a rollout, with the tokens the model generated marked for the loss.

    Built here, packed into micro-batches by `orchestrator.packing`; it never leaves the orchestrator.
    Every per-token list is aligned with `token_ids`.
    """

    rollout_id: str
    token_ids: list[int]
    loss_mask: list[bool]
    """True for tokens the model generated (completions); False for prompts, tool output, templates."""
    inference_logprobs: list[float]
    """The engine's logprob of each generated token; 0.0 where `loss_mask` is False. With in-flight weight
    updates a reply's tokens come from several policies, each logprob from the weights that sampled its
    token: exactly the behaviour probability the trainer's importance correction divides by."""
    policy_versions: list[int] = []
    """The weights version that sampled each generated token (`ModelCall.completion_policy_versions`, else
    the version the rollout started on); -1 where `loss_mask` is False."""
    advantage: float
    index: int = 0
    """Its position among its rollout's samples (call order)."""

    @property
    def loss_tokens(self) -> int:
        return sum(self.loss_mask)


def build_samples(rollout_id: str, calls: Sequence[ModelCall], advantage: float,
                  version: int = 0) -> list[TrainingSample]:
    """The rollout's training samples, in call order; `version`: the weights it started on, for calls whose
    engine named no per-token versions."""
    samples: list[TrainingSample] = []
    current: TrainingSample | None = None
    for call in sorted(calls, key=lambda c: c.idx):
        if not call.trainable:
            current = None
            continue
        prompt, completion = call.prompt_token_ids or [], call.completion_token_ids or []
        if current is not None and extends(prompt, current.token_ids):
            new_prompt = prompt[len(current.token_ids):]
        else:
            current = TrainingSample(rollout_id=rollout_id, token_ids=[], loss_mask=[], inference_logprobs=[],
                                     advantage=advantage, index=len(samples))
            samples.append(current)
            new_prompt = prompt
        current.token_ids += new_prompt + completion
        current.loss_mask += [False] * len(new_prompt) + [True] * len(completion)
        current.inference_logprobs += [0.0] * len(new_prompt) + list(call.completion_logprobs or [])
        versions = call.completion_policy_versions or [version] * len(completion)
        current.policy_versions += [-1] * len(new_prompt) + list(versions)
    return samples


def extends(prompt: Sequence[int], sequence: Sequence[int]) -> bool:
    return len(prompt) >= len(sequence) and list(prompt[: len(sequence)]) == list(sequence)


def loss_calls(calls: Sequence[ModelCall]) -> list[tuple[int, int]]:
    """`(idx, completion tokens)` of each call the samples train on, in call order."""
    return [(c.idx, len(c.completion_token_ids or [])) for c in sorted(calls, key=lambda c: c.idx) if c.trainable]


def per_call(spans: Sequence[tuple[int, int]], values: Sequence[float]) -> list[tuple[int, list[float]]] | None:
    """A rollout's per-loss-token `values` split onto its calls (`loss_calls`): `(idx, values)` each; None
    when the counts disagree (a sample whose very first token was generated: no logprob predicts it)."""
    if sum(n for _, n in spans) != len(values):
        return None
    out, start = [], 0
    for idx, n in spans:
        out.append((idx, list(values[start:start + n])))
        start += n
    return out
