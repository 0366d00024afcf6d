"""`canonical_example_id`: an example id from a JSON value's meaning, not its key order or spelling.

benchmax documents the id as the SHA-256 of the value's canonical JSON (sorted keys, integral floats
written as ints, versioned), so ids stay the same whether an env runs under benchmax or this layer.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite numbers cannot be used for identity")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("JSON object keys used for identity must be strings")
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    raise ValueError(f"{type(value).__name__} is not JSON-canonicalizable")


def canonical_example_id(value: Any) -> str:
    text = json.dumps({"v": 1, "value": _canonical(value)}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__ = ["canonical_example_id"]
