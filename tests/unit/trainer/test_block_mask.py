"""The flex_attention path for prompt trees: compiled block-mask construction never builds the dense
T x T mask (uncompiled it took 2.5 GiB at 16k tokens), and the block mask computes the dense mask's
logprobs (forward only: flex_attention has no backward on the CPU)."""

import pytest
import torch
from tests.support.memory import peak_rss_growth_mib
from tests.support.tiny_model import tiny_model

from looprl.handoff import Tree
from looprl.trainer import attention
from looprl.trainer.logprobs import token_logprobs, tree_block_mask

pytestmark = pytest.mark.slow  # compiles (about a minute on a busy CPU; cached afterwards)


def _row(tokens: int) -> list[Tree]:
    half = tokens // 2
    return [Tree(prefix=half // 4, branches=[half // 4, half // 2]), Tree(prefix=tokens - half)]


def test_block_mask_at_8k_tokens_never_builds_the_dense_mask():
    tree_block_mask(_row(1024), torch.device("cpu"))  # compile first: compiling takes memory too
    growth = peak_rss_growth_mib(lambda: tree_block_mask(_row(8192), torch.device("cpu")))
    assert growth < 32, f"{growth:.0f} MiB: a dense 8k x 8k bool mask alone is 64 MiB"


def test_flex_attention_tree_equals_the_dense_mask():
    trees = [Tree(prefix=40, branches=[30, 25, 9]), Tree(prefix=17)]
    ids = torch.randint(2, 64, (121,), generator=torch.Generator().manual_seed(0))
    pos = torch.cat([torch.arange(40), torch.arange(40, 70), torch.arange(40, 65), torch.arange(40, 49),
                     torch.arange(17)])
    out = []
    for kernel in ("sdpa", "flex_attention"):
        model = attention.use(tiny_model(), kernel)
        with torch.no_grad():
            out.append(token_logprobs(model, ids, pos, trees=trees)[0])
    torch.testing.assert_close(out[1], out[0], atol=1e-5, rtol=1e-5)
