"""`benchmax.envs.base`: the chat/tool-loop env and its dataset helpers."""

from looprl.envs.types import Message, Tool

from .dataset import JsonlDataset, JsonRow, resolve_dataset_path
from .env import BaseEnv, BaseRollout

Messages = list[Message]

__all__ = ["BaseEnv", "BaseRollout", "JsonRow", "JsonlDataset", "Message", "Messages", "Tool", "resolve_dataset_path"]
