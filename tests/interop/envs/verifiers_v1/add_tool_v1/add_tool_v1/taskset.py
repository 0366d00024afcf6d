"""Additions the model is asked to do with the `add` tool: a verifiers 0.4 env as `vf-init -T` scaffolds it,
with two rewards, a metric, a stop condition and a task-scoped MCP tool server (`servers/tool.py`)."""

import logging
from typing import Literal

import verifiers.v1 as vf

from add_tool_v1.servers.tool import AddToolToolset

logger = logging.getLogger(__name__)

PAIRS = {"train": [(2, 3), (-1, 4), (20, 22), (5, 5)], "test": [(7, 8), (1, 1)]}


class AddToolData(vf.TaskData):
    """One row's data: the two numbers and their sum."""

    a: int
    b: int
    answer: int


class AddToolTaskConfig(vf.TaskConfig):
    """Knobs the task reads from ``self.config``; configure them under ``--env.taskset.task.*``."""
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class AddToolTask(vf.Task[AddToolData, vf.State, AddToolTaskConfig]):
    """Rewards, hooks, and servers, with row data available on ``self.data``."""

    @classmethod
    def toolsets(cls, config: AddToolTaskConfig) -> list[vf.Toolset]:
        return [AddToolToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        reply = trace.last_reply
        logger.info("correct looks at %r (answer %d)", reply, self.data.answer)
        return float(reply == str(self.data.answer))

    @vf.reward(weight=0.5)
    async def used_tool(self, trace: vf.Trace) -> float:
        return float(bool(trace.tool_messages))

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))

    @vf.stop
    async def tool_budget(self, trace: vf.Trace) -> bool:
        """Three tool results and still no answer: stop before the next model call."""
        return len(trace.tool_messages) >= 3


class AddToolConfig(vf.TasksetConfig):
    split: Literal["train", "test"] = "train"
    """Which numbers to ask about."""
    num_tasks: int | None = None
    """How many tasks to build (None: all of the split)."""
    task: AddToolTaskConfig = AddToolTaskConfig()


class AddToolTaskset(vf.Taskset[AddToolTask, AddToolConfig]):
    def load(self) -> list[AddToolTask]:
        pairs = PAIRS[self.config.split][: self.config.num_tasks]
        return [AddToolTask(AddToolData(prompt=f"What is {a} + {b}? Use the add_tool_add tool.", a=a, b=b,
                                        answer=a + b), self.config.task) for a, b in pairs]
