"""Reward against wall-clock on the CPU demo: `looprl rl` and TRL's `GRPOTrainer`, same model, reward, budget.

Both train SmolLM2-135M-Instruct on `examples/demo` (single-digit additions, reward `correct` +
0.5 * `brief` from `examples/demo/env.py:score`) with the same sampling (temperature 1, 12 new
tokens), rollouts per step (32, groups of 8), learning rate, loss (token-level clipped ratio, no KL)
and a fixed wall-clock budget each, one after the other. looprl runs as a user runs it (`looprl rl`,
engine + orchestrator + trainer processes, one step of off-policy lag); TRL generates with
`model.generate` in its own process. The clock starts when each is launched (model loading included);
a step's reward is timed when it became known: when looprl wrote the step's batch, when TRL called
its reward functions (generation done, before the training step).

Prints, per system, the mean train reward of each step against seconds since launch, and a summary:
final reward (mean of the last 3 steps) and the seconds looprl needed to reach TRL's final reward.

    .venv/bin/python bench/learning.py [--budget-s 600] [--lr 2e-5] [--out runs/bench-learning]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo"


def run_looprl(args: argparse.Namespace) -> list[tuple[float, float]]:
    out = Path(args.out) / "looprl"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    command = [sys.executable, "-m", "looprl.cli", "rl", "@", str(DEMO / "rl.toml"), "--output_dir", str(out),
               "--max_steps", "10000", "--orchestrator.eval.num_examples", "0", "--trainer.optim.lr", str(args.lr)]
    started = time.time()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=args.budget_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    with sqlite3.connect(out / "looprl.db") as db:
        rewards = [json.loads(m)["reward"] for (m,) in db.execute("SELECT metrics FROM steps ORDER BY step")]
    return list(zip(_generation_end_times(out, started), rewards))


def _generation_end_times(out: Path, started: float) -> list[float]:
    """When each step's batch file was written (seconds since launch): the step's rewards were known then."""
    steps = sorted((out / "steps").glob("step_*"), key=lambda p: int(p.name.removeprefix("step_")))
    return [(p / "batch.json").stat().st_mtime - started for p in steps if (p / "batch.json").exists()]


def run_trl(args: argparse.Namespace) -> list[tuple[float, float]]:
    started = time.time()
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from looprl.models import DEFAULT_MODEL, resolve_model

    spec = importlib.util.spec_from_file_location("demo_env", DEMO / "env.py")
    assert spec and spec.loader
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    rows = [json.loads(line) for line in (DEMO / "data" / "train.jsonl").read_text().splitlines()]
    dataset = Dataset.from_list([{"prompt": r["prompt_messages"], "answer": r["answer"]} for r in rows] * 50)

    scored_at: list[float] = []  # when each step's rewards were computed (generation done, before training)

    def component(name: str):
        def reward(completions, answer, **_):
            scored_at.append(time.time() - started)
            return [demo.score(c[-1]["content"].strip(), a)[name] for c, a in zip(completions, answer)]
        reward.__name__ = name
        return reward

    points: list[tuple[float, float]] = []

    class Clock(TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                points.append((scored_at[-1], logs["reward"]))

        def on_step_end(self, _args, state, control, **kw):
            control.should_training_stop = time.time() - started > args.budget_s

    config = GRPOConfig(
        output_dir=str(Path(args.out) / "trl"), per_device_train_batch_size=32, num_generations=8,
        gradient_accumulation_steps=1, max_completion_length=12, reward_weights=[1.0, 0.5], temperature=1.0,
        loss_type="dapo", beta=0.0,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=1.0,
        optim="adamw_torch_fused", use_cpu=True, report_to=[], save_strategy="no", bf16=False, logging_steps=1,
        max_steps=10000, seed=0,
    )
    trainer = GRPOTrainer(model=str(resolve_model(DEFAULT_MODEL)),
                          reward_funcs=[component("correct"), component("brief")],
                          args=config, train_dataset=dataset, callbacks=[Clock()])
    trainer.train()
    return points


def summary(name: str, points: list[tuple[float, float]]) -> dict[str, float | None]:
    last = [r for _, r in points[-3:]]
    return {"steps": len(points), "final_reward": sum(last) / len(last) if last else None,
            "first_reward": points[0][1] if points else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=600)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--out", default="runs/bench-learning")
    parser.add_argument("--only", choices=["looprl", "trl"])
    args = parser.parse_args()
    os.chdir(ROOT)
    results = {}
    for name, fn in (("looprl", run_looprl), ("trl", run_trl)):
        if args.only in (None, name):
            results[name] = fn(args)
            print(f"{name}: " + " ".join(f"{t:.0f}s:{r:.2f}" for t, r in results[name]), flush=True)
    for name, points in results.items():
        print(name, json.dumps(summary(name, points)))
    if len(results) == 2 and results["trl"]:
        target = summary("trl", results["trl"])["final_reward"]
        reached = next((t for t, r in results["looprl"] if r >= target), None)
        trl_time = results["trl"][-1][0]
        print(f"looprl reaches TRL's final reward {target:.3f} after "
              f"{reached if reached is None else round(reached)} s "
              f"(TRL's run: {trl_time:.0f} s)")


if __name__ == "__main__":
    main()
