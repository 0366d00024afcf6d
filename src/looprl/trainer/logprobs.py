"""Per-token logprobs (and entropies) of a packed row under the model, by one teacher-forced pass.

`position_ids` that restart at 0 make transformers build a block-diagonal causal mask (no
`attention_mask`, no cache), so the samples packed in a row attend only to themselves. Entry t of
the result is the logprob of token t given the tokens before it in its sequence; entry 0 of the row
has no predecessor and is 0 (it never carries loss).

Logprobs are of the raw logits (temperature 1), the engine's default `raw_logprobs` mode.
"""

from __future__ import annotations

from typing import Any

import torch


def token_logprobs(model: Any, token_ids: torch.Tensor, position_ids: torch.Tensor,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`(logprobs [T], entropy [T] or None)` for a row of `T` tokens; entropy carries no gradient."""
    logits = model(input_ids=token_ids[None], position_ids=position_ids[None], use_cache=False).logits[0, :-1]
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logprobs = logp_all.gather(1, token_ids[1:, None]).squeeze(1)
    zero = logprobs.new_zeros(1)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = torch.cat([zero, -(logp_all.exp() * logp_all).sum(-1)])
    return torch.cat([zero, logprobs]), entropy
