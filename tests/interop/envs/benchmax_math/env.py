"""A benchmax math env with a calculator tool, written against benchmax 0.2's API (as upstream's `envs/math`).

Runs unchanged under real benchmax (Python 3.12) and under looprl's compatibility layer (3.11).
"""

import logging
import re

from benchmax.envs import BaseEnv, BaseRollout, Example, JsonlDataset, JsonRow, RewardMap, canonical_example_id
from benchmax.envs.base import resolve_dataset_path

logger = logging.getLogger(__name__)

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an integer expression with + - *.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}


def to_example(row: JsonRow) -> Example:
    payload = {"prompt_messages": [{"role": "system", "content": "Use the calculator, then answer with the number."},
                                   {"role": "user", "content": row["question"]}],
               "answer": row["answer"]}
    return Example(id=canonical_example_id(row), payload=payload)


class MathToolEnv(BaseEnv):
    def __init__(self, *, train_path: str = "train.jsonl", eval_path: str = "eval.jsonl", max_turns: int = 3,
                 max_tool_calls: int = 2) -> None:
        super().__init__(max_turns=max_turns, max_tool_calls=max_tool_calls)
        self.paths = {"train": train_path, "eval": eval_path}

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        path = resolve_dataset_path(base_dir, self.paths[split])
        return JsonlDataset(path, row_to_example=to_example, max_examples=max_examples)

    async def list_tools(self):
        return [CALCULATOR]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        expression = tool_args["expression"]
        logger.info("calculator(%s)", expression)
        if not re.fullmatch(r"[\d+\-* ]+", expression):
            raise ValueError(f"calculator cannot read {expression!r}")
        return eval(expression)  # digits and + - * only

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap:
        reply = rollout.messages[-1].get("content") or ""
        correct = float(reply.strip() == rollout.example_args["answer"])
        logger.info("answer %r scored %s", reply, correct)
        return {"correct": correct}
