"""The environment SDK: what users write environments against (seeds/001).

    from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, Tool
"""

from looprl.envs.base_env import BaseEnv
from looprl.envs.dataset import Dataset, JsonlDataset
from looprl.envs.environment import Environment
from looprl.envs.failures import RolloutFailure
from looprl.envs.rollout import BaseRollout
from looprl.envs.types import (
    DatasetSplit,
    Example,
    GroupRequest,
    LogRecordData,
    Message,
    RolloutResult,
    Tool,
)

__all__ = [
    "BaseEnv",
    "BaseRollout",
    "Dataset",
    "DatasetSplit",
    "Environment",
    "Example",
    "GroupRequest",
    "JsonlDataset",
    "LogRecordData",
    "Message",
    "RolloutFailure",
    "RolloutResult",
    "Tool",
]
