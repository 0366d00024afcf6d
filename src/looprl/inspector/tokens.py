"""Token ids to text for the token view, with the run model's tokenizer when it is already on disk.

The inspector never downloads or converts a model: it uses a local model directory, the bundled
model once `looprl.model_loading` has converted it, or a Hub id already in the Hugging Face cache. Anything
else (or a tokenizer that fails to load) leaves the view showing ids. Tokenizers are loaded once per
model name; `transformers` is imported only when one is found.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from looprl.model_loading import DEFAULT_MODEL, cache_dir


class TokenDecoder:
    """Per-token text of token ids, by model name; a missing tokenizer is remembered as None."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokenizers: dict[str, tuple[str, Any] | None] = {}

    def decode(self, model: str, ids: list[list[int]]) -> tuple[str | None, list[list[str]] | None]:
        """`(tokenizer source, texts)` with one string per id, or `(None, None)` when no tokenizer is at hand."""
        with self._lock:
            if model not in self._tokenizers:
                self._tokenizers[model] = _load(model)
            found = self._tokenizers[model]
        if found is None:
            return None, None
        source, tokenizer = found
        return source, [tokenizer.batch_decode([[i] for i in row]) for row in ids]


def local_model_dir(model: str) -> Path | None:
    """A directory holding `model`'s tokenizer on this machine, without fetching anything."""
    if model.lower() == DEFAULT_MODEL:
        path = cache_dir() / "models" / DEFAULT_MODEL
        return path if path.is_dir() else None
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if model.count("/") == 1:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(model, "tokenizer_config.json")
        return Path(hit).parent if isinstance(hit, str) else None
    return None


def _load(model: str) -> tuple[str, Any] | None:
    path = local_model_dir(model)
    if path is None:
        return None
    try:
        from transformers import AutoTokenizer

        return str(path), AutoTokenizer.from_pretrained(path)
    except Exception:  # a broken or partial directory: show ids instead
        return None
