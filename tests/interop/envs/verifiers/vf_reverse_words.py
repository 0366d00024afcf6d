"""A single-turn verifiers env (as upstream's `reverse_text`): reverse a word.

`exact` (weight 1) and `overlap` (weight 0.5) score the answer; `answer_chars` is a zero-weight metric;
`picky` raises on an answer containing "boom", which verifiers swallows (0 and an ERROR record).
"""

import logging

import verifiers as vf
from datasets import Dataset

logger = logging.getLogger(__name__)
WORDS = ["stressed", "drawer", "boom", "looprl"]


def load_environment(num_words: int = len(WORDS)) -> vf.Environment:
    rows = [{"question": f"Reverse the word: {w}", "answer": w[::-1], "info": {"word": w}} for w in WORDS[:num_words]]

    def answer_of(completion) -> str:
        return (completion[-1]["content"] if isinstance(completion, list) else completion).strip()

    def exact(completion, answer, **kwargs) -> float:
        return float(answer_of(completion) == answer)

    def overlap(completion, answer, **kwargs) -> float:
        got = answer_of(completion)
        return sum(a == b for a, b in zip(got, answer)) / max(len(answer), 1)

    def answer_chars(completion, **kwargs) -> float:
        return float(len(answer_of(completion)))

    def picky(completion, **kwargs) -> float:
        logger.info("picky looks at %r", answer_of(completion))
        if "boom" in answer_of(completion):
            raise ValueError("picky cannot score a boom")
        return 1.0

    rubric = vf.Rubric(funcs=[exact, overlap, answer_chars, picky], weights=[1.0, 0.5, 0.0, 0.25])
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt="Answer with the reversed word only.",
                            rubric=rubric)
