"""Per-token logprobs (and entropies) of a packed row under the model, by one teacher-forced pass.

`position_ids` that restart at 0 make transformers build a block-diagonal causal mask (no
`attention_mask`, no cache), so the samples packed in a row attend only to themselves. Entry t of
the result is the logprob of token t given the tokens before it in its sequence. Only the positions
that predict a loss token go through the vocabulary projection (`logits_to_keep` as indices): with a
49k vocabulary that is a large share of the compute, and prompts need none of it. Other entries
are 0.

Logprobs are of the raw logits (temperature 1), the engine's default `raw_logprobs` mode.
"""

from __future__ import annotations

from typing import Any

import torch


def token_logprobs(model: Any, token_ids: torch.Tensor, position_ids: torch.Tensor,
                   loss_mask: torch.Tensor | None = None,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`(logprobs [T], entropy [T] or None)` for a row of `T` tokens, filled where `loss_mask` (default:
    every token but the first); entropy carries no gradient."""
    if loss_mask is None:
        loss_mask = torch.arange(len(token_ids)) > 0
    targets = loss_mask.nonzero().squeeze(1)
    logits = model(input_ids=token_ids[None], position_ids=position_ids[None], use_cache=False,
                   logits_to_keep=targets - 1).logits[0]
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logprobs = torch.zeros(len(token_ids), dtype=logp_all.dtype).index_put((targets,), logp_all.gather(
        1, token_ids[targets, None]).squeeze(1))
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = torch.zeros(len(token_ids)).index_put((targets,), -(logp_all.exp() * logp_all).sum(-1))
    return logprobs, entropy
