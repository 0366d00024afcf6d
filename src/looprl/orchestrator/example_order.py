"""Training examples in shuffled epochs, with a position that a resume can restore.

Each epoch is a fresh permutation of the split (seeded by the run seed and the epoch number), so a
resumed run draws from the same order as the interrupted one. A resume starts at the first position
whose example the prompt ledger does not hold as settled, and passes over the later positions it
does (`done`), so an example in flight when the run stopped is drawn again and none is drawn twice
(`looprl.orchestrator.ledger`).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from looprl.envs.types import Example


@dataclass(frozen=True)
class Draw:
    """One example drawn, and where: `epoch` (0 = the first pass) and `position` in its shuffled order."""

    epoch: int
    position: int
    example: Example


class ExampleOrder:
    def __init__(self, examples: Sequence[Example], seed: int, state: dict[str, Any] | None = None,
                 done: Collection[tuple[int, int]] = ()) -> None:
        """`state`: `{"epoch", "position"}` to start at; `done`: `(epoch, position)` pairs after it to pass over."""
        if not examples:
            raise ValueError("no training examples")
        self.examples, self.seed, self.done = list(examples), seed, set(done)
        self.epoch, self.position = (state or {}).get("epoch", 0), (state or {}).get("position", 0)
        self._order = self._permutation(self.epoch)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.examples)))
        random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order

    def draw(self) -> Draw:
        while True:
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            at = (self.epoch, self.position)
            self.position += 1
            if at in self.done:
                self.done.discard(at)
                continue
            return Draw(at[0], at[1], self.examples[self._order[at[1]]])

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position}
