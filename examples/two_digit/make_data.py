"""Writes data/train.jsonl and data/eval.jsonl: two-digit additions, 400 to train on and 50 held out (seeded)."""

import json
import random
from pathlib import Path

SYSTEM = "Reply with just the number."


def example(a: int, b: int) -> dict:
    return {"prompt_messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} + {b}?"}],
            "answer": a + b}


def main() -> None:
    pairs = random.Random(0).sample([(a, b) for a in range(10, 100) for b in range(10, 100)], 450)
    data = Path(__file__).parent / "data"
    data.mkdir(exist_ok=True)
    for name, part in (("eval", pairs[:50]), ("train", pairs[50:])):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(example(a, b)) + "\n" for a, b in part))


if __name__ == "__main__":
    main()
