"""`benchmax.envs`: the names benchmax envs import, mapped onto looprl's contract.

benchmax's lower-level `Environment` (one `run_rollout` per attempt) is not here: such envs need the
real benchmax (Python 3.12).
"""

from .base import BaseEnv, BaseRollout, JsonlDataset, JsonRow, Message, Messages, Tool
from .dataset import Dataset
from .identity import canonical_example_id
from .shared_types import DatasetSplit, Example, RewardMap, RolloutFailure

__all__ = ["BaseEnv", "BaseRollout", "Dataset", "DatasetSplit", "Example", "JsonRow", "JsonlDataset",
           "Message", "Messages", "RewardMap", "RolloutFailure", "Tool", "canonical_example_id"]
