"""The policy the trainer optimises: a transformers causal LM in training mode.

Loaded through `looprl.models` (the bundled SmolLM2 alias, a local directory or a Hub id), so the
trainer and the inference engine start from exactly the same weights. The KV cache is off: the
trainer only runs teacher-forced passes over packed sequences.
"""

from __future__ import annotations

from typing import Any

from looprl.models import DEFAULT_MODEL, load_model_and_tokenizer


def load_policy(name_or_path: str = DEFAULT_MODEL, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """`(model, tokenizer)`, the model in train mode with its cache disabled."""
    model, tokenizer = load_model_and_tokenizer(name_or_path, dtype=dtype, device=device)
    model.config.use_cache = False
    return model.train(), tokenizer
