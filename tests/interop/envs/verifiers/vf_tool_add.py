"""A verifiers tool env (as upstream's `tool_test`): add two numbers with the `add` tool, which raises
on negative numbers (ToolEnv shows the error to the model; with `strict=True` it ends the rollout)."""

import logging

import verifiers as vf
from datasets import Dataset

logger = logging.getLogger(__name__)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    logger.info("add(%s, %s)", a, b)
    if a < 0 or b < 0:
        raise ValueError("add takes non-negative numbers only")
    return a + b


def load_environment(strict: bool = False, max_turns: int = 3) -> vf.Environment:
    rows = [{"question": f"What is {a} + {b}? Use the add tool.", "answer": str(a + b), "info": {"a": a, "b": b}}
            for a, b in [(2, 3), (-1, 4), (20, 22)]]

    def correct(completion, answer, **kwargs) -> float:
        return float(str(completion[-1].get("content") or "").strip() == answer)

    return vf.ToolEnv(dataset=Dataset.from_list(rows), tools=[add], max_turns=max_turns,
                      rubric=vf.Rubric(funcs=[correct]), stop_errors=[ValueError] if strict else None)
