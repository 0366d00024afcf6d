"""`looprl rescore` on a large run: 10,000 stored single-turn rollouts re-scored with a simple reward.

Writes an eval run of the arithmetic example (groups of 8, one answer each, one log record per
rollout from its reward code) with the store writer, then times `looprl rescore RUN` end to end, as a
user runs it (process start, reading the store, scoring every group, the report). Target: < 10 s.

    .venv/bin/python bench/rescore.py [--rollouts 10000] [--group-size 8]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from looprl.store.records import RolloutRecord, RunInfo  # noqa: E402
from looprl.store.writer import RunStoreWriter  # noqa: E402

ENV = "examples/arithmetic/env.py:ArithmeticEnv"


def write_run(run_dir: Path, rollouts: int, group_size: int) -> None:
    examples = [json.loads(line) for line in (ROOT / "examples/arithmetic/data/train.jsonl").read_text().splitlines()]
    writer = RunStoreWriter(run_dir)
    writer.start_run(RunInfo(run_id=run_dir.name, kind="eval", env=ENV, env_name="ArithmeticEnv", model="bench",
                             created_at=time.time()))
    rng, now, records = random.Random(0), time.time(), []
    for i in range(rollouts):
        group = i // group_size
        example = examples[group % len(examples)]
        right = rng.random() < 0.5
        answer = example["answer"] if right else str(int(example["answer"]) + 1)
        records.append(RolloutRecord(
            rollout_id=f"r{i:06d}", group_id=f"g{group:05d}", example_id=f"e{group % len(examples)}", split="eval",
            messages=[*example["prompt_messages"], {"role": "assistant", "content": f"<answer>{answer}</answer>"}],
            example_args={"answer": example["answer"]}, termination_reason="finished",
            rewards={"correct": float(right), "format": 1.0}, reward=1.0 + right, turns=1,
            started_at=now, finished_at=now + 1, run_id=run_dir.name, env_name="ArithmeticEnv"))
    for start in range(0, len(records), 1000):
        writer.write_rollouts(records[start:start + 1000])
    writer.finish_run(run_dir.name, "completed", {})
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "bench-rescore"
        write_run(run_dir, args.rollouts, args.group_size)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "looprl.cli", "rescore", str(run_dir), "--examples", "0"],
                              cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src")})
        elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    print(proc.stdout)
    print(f"looprl rescore: {args.rollouts} rollouts in {elapsed:.2f} s "
          f"({args.rollouts / elapsed:,.0f} rollouts/s, end to end; target < 10 s)")


if __name__ == "__main__":
    main()
