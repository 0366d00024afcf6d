"""Per-token logprobs (and entropies) of a packed row under the model, by one teacher-forced pass.

A row holds trees (`handoff.Tree`): a prefix, then branches that continue it. The
attention mask lets a token see earlier tokens of its own tree's prefix and of its own branch,
nothing else, so every sample is computed exactly as if it were alone, with its shared prompt
computed once. Entry t of the result is the logprob of token t given what precedes it in its
sample: for most tokens the logits at t-1, for a branch's first token the logits at its prefix's
last token. Only positions that predict a loss token go through the vocabulary projection
(`logits_to_keep` as indices): with a 49k vocabulary that is a large share of the compute, and
prompts need none of it. Other entries are 0.

Logprobs are of the raw logits (temperature 1), the engine's default `raw_logprobs` mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from looprl.handoff import Tree, row_segments


def token_logprobs(model: Any, token_ids: torch.Tensor, position_ids: torch.Tensor,
                   loss_mask: torch.Tensor | None = None, trees: Sequence[Tree] | None = None,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`(logprobs [T], entropy [T] or None)` for a row of `T` tokens laid out as `trees` (default: one
    sequence), filled where `loss_mask` (default: every token but the first); entropy has no gradient."""
    if loss_mask is None:
        loss_mask = torch.arange(len(token_ids)) > 0
    trees = trees or [Tree(prefix=len(token_ids))]
    one_sequence = len(trees) == 1 and not trees[0].branches  # plain causal attention, no mask needed
    targets = loss_mask.nonzero().squeeze(1)
    logits = model(input_ids=token_ids[None], position_ids=position_ids[None], use_cache=False,
                   attention_mask=None if one_sequence else tree_attention(trees)[None, None],
                   logits_to_keep=predecessors(trees)[targets]).logits[0]
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logprobs = torch.zeros(len(token_ids), dtype=logp_all.dtype).index_put((targets,), logp_all.gather(
        1, token_ids[targets, None]).squeeze(1))
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = torch.zeros(len(token_ids)).index_put((targets,), -(logp_all.exp() * logp_all).sum(-1))
    return logprobs, entropy


def predecessors(trees: Sequence[Tree]) -> torch.Tensor:
    """`[T]`: the index whose logits predict each token (t-1, or for a branch's first token its
    prefix's last; -1 for a row's first token, which nothing predicts)."""
    index: list[int] = []
    prefix_end = 0
    for seg in row_segments(trees):
        if seg.branch == 0:
            prefix_end = seg.end
            index += range(seg.start - 1, seg.end - 1)
        elif seg.end > seg.start:
            index += [prefix_end - 1, *range(seg.start, seg.end - 1)]
    return torch.tensor(index)


def tree_attention(trees: Sequence[Tree]) -> torch.Tensor:
    """`[T, T]` bool: token q may attend to token k (earlier or itself, same tree, and k in the prefix
    or in q's own branch)."""
    segments = row_segments(trees)
    tree_of = torch.cat([torch.full((s.end - s.start,), s.tree) for s in segments])
    branch_of = torch.cat([torch.full((s.end - s.start,), s.branch) for s in segments])
    index = torch.arange(len(tree_of))
    return ((tree_of[:, None] == tree_of[None, :])
            & ((branch_of[None, :] == 0) | (branch_of[:, None] == branch_of[None, :]))
            & (index[None, :] <= index[:, None]))
