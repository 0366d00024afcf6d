"""benchmax's `Dataset(examples)`: looprl's `Dataset` takes the same sequence of examples."""

from looprl.envs.dataset import Dataset

__all__ = ["Dataset"]
