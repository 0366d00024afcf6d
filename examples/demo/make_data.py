"""Writes data/train.jsonl and data/eval.jsonl: every single-digit addition, eval held out (seeded)."""

import json
import random
from pathlib import Path

SYSTEM = "Reply with just the number."


def example(a: int, b: int) -> dict:
    return {"prompt_messages": [{"role": "system", "content": SYSTEM},
                                {"role": "user", "content": f"What is {a} + {b}?"}],
            "answer": a + b}


def main() -> None:
    pairs = [(a, b) for a in range(10) for b in range(10)]
    random.Random(0).shuffle(pairs)
    data = Path(__file__).parent / "data"
    data.mkdir(exist_ok=True)
    for name, part in (("eval", pairs[:20]), ("train", pairs[20:])):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(example(a, b)) + "\n" for a, b in part))


if __name__ == "__main__":
    main()
