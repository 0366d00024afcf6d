"""Multi-turn tool use: the model calls a calculator (as in the seeds' example) before answering."""

import ast
import logging
import operator
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, Tool
from looprl.rewards import extract_answer_block, normalize_number

logger = logging.getLogger(__name__)

SYSTEM = ("Use the calculator tool for arithmetic. When you know the result, reply with it inside "
          "<answer></answer> tags.")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg}


def evaluate(expression: str) -> float:
    """Arithmetic on numbers only (no names, no calls): safe to run on model output."""
    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.operand))
        raise ValueError(f"unsupported expression: {ast.dump(node)[:80]}")
    return walk(ast.parse(expression, mode="eval").body)


class CalculatorEnv(BaseEnv):
    max_turns = 4
    max_tool_calls = 6

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        def row_to_example(row):
            return {"prompt_messages": [{"role": "system", "content": SYSTEM},
                                        {"role": "user", "content": row["question"]}],
                    "answer": str(row["answer"])}
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=row_to_example, max_examples=max_examples)

    async def list_tools(self) -> list[Tool]:
        return [{"type": "function", "function": {
            "name": "calculator", "description": "Evaluate an arithmetic expression such as '(3 + 4) * 5'.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                           "required": ["expression"]}}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args):
        logger.info(f"calling {tool_name} with {tool_args}")
        try:
            result = evaluate(str(tool_args.get("expression", "")))
        except (ValueError, SyntaxError, ZeroDivisionError) as e:
            logger.warning("bad expression %r: %s", tool_args.get("expression"), e)
            return f"Error: {e}"
        logger.info(f"result: {result}")
        return str(int(result) if float(result).is_integer() else result)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = normalize_number(extract_answer_block(rollout.messages))
        used_tool = any(m["role"] == "tool" for m in rollout.messages)
        logger.info("answer %s, expected %s, used tool: %s", answer, rollout.example_args["answer"], used_tool)
        return {"correct": float(answer == rollout.example_args["answer"]), "used_tool": float(used_tool)}
