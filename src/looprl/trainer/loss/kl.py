"""KL penalty towards a reference policy, per token (the k3 estimator, as in GRPO).

kl = exp(ref - logp) - (ref - logp) - 1: non-negative, unbiased for KL(policy || ref) on tokens
sampled from the policy, and zero where the two agree.
"""

from __future__ import annotations

import torch


def token_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0
