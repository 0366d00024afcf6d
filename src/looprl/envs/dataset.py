"""Datasets: finite sequences of `Example`s that an environment builds in `create_dataset`.

`JsonlDataset` reads one JSON object per line. Bad input fails loudly and precisely: invalid JSON
names `file:line`, a payload without a non-empty `prompt_messages` list says so, and `max_examples`
stops reading early, so validation and capped runs never parse a whole large file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from looprl.envs.types import Example
from looprl.errors import UserError

RowToExample = Callable[[dict[str, Any]], "dict[str, Any] | Example"]


def example_id(payload: dict[str, Any]) -> str:
    """A stable id from the payload's content, so the same example has the same id in every run."""
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def check_payload(payload: Any, where: str) -> None:
    """Raise `UserError` unless `payload` is a dict with a non-empty `prompt_messages` list of messages."""
    if not isinstance(payload, dict):
        raise UserError(f"{where}: an example payload must be a JSON object, got {type(payload).__name__}")
    messages = payload.get("prompt_messages")
    if not isinstance(messages, list) or not messages:
        raise UserError(f"{where}: example payload has no non-empty 'prompt_messages' list "
                        f"(keys: {', '.join(sorted(payload)) or 'none'})")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise UserError(f"{where}: prompt_messages[{i}] must be an object with 'role' and 'content'")


def to_example(value: dict[str, Any] | Example, where: str) -> Example:
    """Turn a payload dict (or an `Example`) into a checked `Example` with a stable id."""
    if isinstance(value, Example):
        check_payload(value.payload, where)
        return value
    check_payload(value, where)
    return Example(id=example_id(value), payload=value)


class Dataset(Sequence[Example]):
    """A finite, indexable sequence of examples. Build one from any iterable of payloads or Examples."""

    def __init__(self, items: Iterable[dict[str, Any] | Example] = (), *, max_examples: int | None = None,
                 source: str = "dataset") -> None:
        self._examples: list[Example] = []
        for i, item in enumerate(items):
            if max_examples is not None and len(self._examples) >= max_examples:
                break
            self._examples.append(to_example(item, f"{source}[{i}]"))

    def __len__(self) -> int:
        return len(self._examples)

    @overload
    def __getitem__(self, index: int) -> Example: ...
    @overload
    def __getitem__(self, index: slice) -> list[Example]: ...
    def __getitem__(self, index: int | slice) -> Example | list[Example]:
        return self._examples[index]

    def __iter__(self) -> Iterator[Example]:
        return iter(self._examples)


class JsonlDataset(Dataset):
    """Examples from a JSON-lines file; `row_to_example` maps each row to a payload (default: the row)."""

    def __init__(self, path: str | Path, row_to_example: RowToExample | None = None, *,
                 max_examples: int | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise UserError(f"dataset file not found: {self.path}")
        super().__init__()
        convert = row_to_example or (lambda row: row)
        with self.path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                if max_examples is not None and len(self._examples) >= max_examples:
                    break
                if not line.strip():
                    continue
                where = f"{self.path}:{lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise UserError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
                self._examples.append(to_example(convert(row), where))
