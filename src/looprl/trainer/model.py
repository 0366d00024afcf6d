"""The policy the trainer optimises: a transformers causal LM in training mode, float32 on the CPU.

Loaded through `looprl.model_loading` (the bundled SmolLM2 alias, a local directory or a Hub id), so the
trainer and the inference engine start from exactly the same weights. The weights stay float32
master weights (bfloat16 compute is `trainer.parallel`'s business) and move to their device when
`parallel.prepare` places or shards them. The KV cache is off: the trainer only runs
teacher-forced passes over packed sequences. `kernel` is the attention kernel (`trainer.attention`, as
`looprl.device` resolves it): flex_attention lets shared-prompt trees use a block mask instead of a dense
one (`trainer.attention`, `trainer.logprobs`).
"""

from __future__ import annotations

from typing import Any

import torch

from looprl.device import Kernel
from looprl.model_loading import DEFAULT_MODEL, load_model_and_tokenizer
from looprl.trainer import attention


def load_policy(name_or_path: str = DEFAULT_MODEL, kernel: Kernel = "sdpa",
                on_meta: bool = False) -> tuple[Any, Any]:
    """`(model, tokenizer)`, the model in train mode with its cache disabled; `on_meta`: built on the meta
    device, no weight read (an FSDP rank but 0, `parallel.Ranks.on_meta`: sharding gives it rank 0's)."""
    model, tokenizer = load_model_and_tokenizer(name_or_path, dtype="float32", device="meta" if on_meta else "cpu")
    attention.use(model, kernel)
    model.config.use_cache = False
    return model.train(), tokenizer


def as_reference(model: Any) -> Any:
    """The KL reference model: in train mode like the policy, every dropout off, its parameters frozen.

    The trainer alternates policy and reference passes every micro-batch; with both in train mode no module's
    `training` flag ever flips, so nothing keyed on it (a compiled graph, transformers' flex_attention wrapper,
    which compiles anew at each flip) changes between them. Train mode with dropout off computes exactly
    what eval mode would. Its passes run under `no_grad` (`trainer.step`)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0
    if hasattr(model.config, "attention_dropout"):
        model.config.attention_dropout = 0.0
    model.requires_grad_(False)
    return model.train()
