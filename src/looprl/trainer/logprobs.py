"""Per-token logprobs (and entropies) of a packed row under the model, by one teacher-forced pass.

A row holds trees (`handoff.Tree`): a prefix, then branches that continue it. The
attention mask lets a token see earlier tokens of its own tree's prefix and of its own branch,
nothing else, so every sample is computed exactly as if it were alone, with its shared prompt
computed once. Entry t of the result is the logprob of token t given what precedes it in its
sample: for most tokens the logits at t-1, for a branch's first token the logits at its prefix's
last token. Only positions that predict a loss token go through the vocabulary projection
(`logits_to_keep` as indices): with a 49k vocabulary that is a large share of the compute, and
prompts need none of it. That projection is the trainer's `LogprobHead` (`trainer.logprob_head`):
float32, a chunk of tokens at a time, so the full logits never exist. Other entries are 0.

Two attention paths give the same result: a dense `[T, T]` boolean mask (`tree_attention`, for sdpa),
and a flex_attention `BlockMask` (`tree_block_mask`), for a model given flex_attention
(`trainer.attention`). Which one a pass gets is `looprl.device.pass_kernel`'s choice: the model's
kernel, except on the CPU in a pass with gradients (no flex_attention backward there). A flex pass gets
a block mask even for one plain sequence, so every flex pass runs the same compiled graph. The block
mask's construction is compiled (once, with dynamic shapes and without gradients, so rows of any length
in any pass reuse it): uncompiled, `create_block_mask` evaluates the rule on the dense T x T grid first
(1 GiB per bool copy at 32k tokens, several copies), compiled it never builds it, so rows of 8k-32k
tokens fit. The tensors stay on `token_ids`' device.

Logprobs are of the raw logits (temperature 1), the engine's default `raw_logprobs` mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from looprl.device import pass_kernel
from looprl.handoff import Tree, row_segments
from looprl.trainer import attention
from looprl.trainer.logprob_head import logprob_head


def token_logprobs(model: Any, token_ids: torch.Tensor, position_ids: torch.Tensor,
                   loss_mask: torch.Tensor | None = None, trees: Sequence[Tree] | None = None,
                   with_entropy: bool = False, entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`(logprobs [T], entropy [T] or None)` for a row of `T` tokens laid out as `trees` (default: one
    sequence), filled where `loss_mask` (default: every token but the first); the entropy has a gradient
    only with `entropy_grad` (the loss's entropy bonus)."""
    device = token_ids.device
    if loss_mask is None:
        loss_mask = torch.arange(len(token_ids), device=device) > 0
    trees = trees or [Tree(prefix=len(token_ids))]
    targets = loss_mask.nonzero().squeeze(1)
    with logprob_head(model).scoring(token_ids[targets], entropy_grad):
        scored = model(input_ids=token_ids[None], position_ids=position_ids[None], use_cache=False,
                       attention_mask=attention_mask(model, trees, device),
                       logits_to_keep=predecessors(trees).to(device)[targets]).logits[0]
    logprobs = torch.zeros(len(token_ids), device=device).index_put((targets,), scored[:, 0])
    entropy = torch.zeros(len(token_ids), device=device).index_put((targets,), scored[:, 1]) if with_entropy else None
    return logprobs, entropy


def attention_mask(model: Any, trees: Sequence[Tree], device: torch.device) -> Any:
    """The mask of `trees` for this pass's kernel: a block mask for flex_attention; for sdpa a dense one, or
    None for one plain sequence (causal attention)."""
    if pass_kernel(attention.kernel(model), device, torch.is_grad_enabled()) == "flex_attention":
        return tree_block_mask(trees, device)
    if len(trees) == 1 and not trees[0].branches:
        return None
    return tree_attention(trees).to(device)[None, None]


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
    tree_of, branch_of = _labels(trees, torch.device("cpu"))
    index = torch.arange(len(tree_of))
    return ((tree_of[:, None] == tree_of[None, :])
            & ((branch_of[None, :] == 0) | (branch_of[:, None] == branch_of[None, :]))
            & (index[None, :] <= index[:, None]))


def tree_block_mask(trees: Sequence[Tree], device: torch.device) -> Any:
    """The same rule as `tree_attention`, as a flex_attention `BlockMask` (blocks of 128 tokens that no
    query may see are skipped; no `[T, T]` tensor is built). Built without gradients whatever the pass, so
    one compiled graph serves every pass."""
    with torch.no_grad():
        return _compiled_block_mask(*_labels(trees, device))


def _block_mask(tree_of: torch.Tensor, branch_of: torch.Tensor) -> Any:
    from torch.nn.attention.flex_attention import create_block_mask

    def visible(batch: torch.Tensor, head: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (tree_of[q] == tree_of[k]) & ((branch_of[k] == 0) | (branch_of[q] == branch_of[k])) & (k <= q)

    return create_block_mask(visible, None, None, len(tree_of), len(tree_of), device=tree_of.device)


# torch's advice for create_block_mask: the labels are graph inputs, the rule is traced inside the
# compiled function, and `dynamic=True` makes one compilation serve every row length.
_compiled_block_mask = torch.compile(_block_mask, dynamic=True)


def _labels(trees: Sequence[Tree], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """`(tree index, branch index (0: the prefix))` of every token of the row."""
    segments = row_segments(trees)
    tree_of = torch.cat([torch.full((s.end - s.start,), s.tree) for s in segments])
    branch_of = torch.cat([torch.full((s.end - s.start,), s.branch) for s in segments])
    return tree_of.to(device), branch_of.to(device)
