"""A verifiers env with a group reward function: the shortest answer of the group scores 1."""

import logging

import verifiers as vf
from datasets import Dataset

logger = logging.getLogger(__name__)


def load_environment() -> vf.Environment:
    rows = [{"question": q, "answer": ""} for q in ["Name a colour.", "Name an animal."]]

    def shortest(completions, **kwargs) -> list[float]:
        lengths = [len(c[-1]["content"]) for c in completions]
        logger.info("group answer lengths %s", sorted(lengths))
        return [float(n == min(lengths)) for n in lengths]

    def said_something(completion, **kwargs) -> float:
        return float(bool(completion[-1]["content"]))

    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows),
                            rubric=vf.Rubric(funcs=[shortest, said_something], weights=[2.0, 1.0]))
