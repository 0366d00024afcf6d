"""Reward helpers for env code: reading the model's final answer out of a transcript."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["extract_answer_block", "extract_completion_text", "normalize_number"]

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def extract_completion_text(messages: list[dict[str, Any]]) -> str:
    """The content of the last assistant message (empty when the model never answered)."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return _text(message.get("content")).strip()
    return ""


def extract_answer_block(text_or_messages: str | list[dict[str, Any]]) -> str | None:
    """The text of the last `<answer>...</answer>` block, stripped; None when there is none."""
    text = text_or_messages if isinstance(text_or_messages, str) else extract_completion_text(text_or_messages)
    blocks = _ANSWER.findall(text)
    return blocks[-1].strip() if blocks else None


def normalize_number(text: str | None) -> str | None:
    """A numeric answer in canonical form ("1,000" -> "1000", "3.50" -> "3.5"); None if not a number."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "").rstrip(".").strip("$ ")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return str(int(value)) if value.is_integer() else repr(value)
