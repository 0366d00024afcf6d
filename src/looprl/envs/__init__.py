"""The environment SDK: what users write environments against (seeds/001), and nothing else.

    from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, Tool
    from looprl.envs.logging import rollout_context, group_context

It imports only the standard library, pydantic, openai (with its aiohttp transport), httpx and
`looprl.errors`: the runtime that runs environments (`looprl.envserver`) imports it, never the other
way round. Modules named `_*` implement `BaseEnv`'s model/tool loop and are not part of the
contract; the runtime reaches what it needs of them through `looprl.envs.runtime_api`, never directly
(an import-linter contract).
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
