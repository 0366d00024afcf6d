"""Training examples in shuffled epochs, with a position that a checkpoint can save and restore.

Each epoch is a fresh permutation of the split (seeded by the run seed and the epoch number), so a
resumed run draws exactly the examples the interrupted one would have drawn.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from looprl.envs.types import Example


class ExampleOrder:
    def __init__(self, examples: Sequence[Example], seed: int, state: dict[str, Any] | None = None) -> None:
        if not examples:
            raise ValueError("no training examples")
        self.examples, self.seed = list(examples), seed
        self.epoch, self.position = (state or {}).get("epoch", 0), (state or {}).get("position", 0)
        self._order = self._permutation(self.epoch)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.examples)))
        random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order

    def next(self) -> Example:
        if self.position == len(self._order):
            self.epoch, self.position = self.epoch + 1, 0
            self._order = self._permutation(self.epoch)
        example = self.examples[self._order[self.position]]
        self.position += 1
        return example

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position}
