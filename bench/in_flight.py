"""In-flight weight updates against weights swapped between replies, on a task with long-tailed reply lengths.

`looprl rl` on the bundled SmolLM2-135M and `bench/long_tail_env.py:LongTailEnv` (one example in ten may run
to 8x the tokens of the others), each seed once with `orchestrator.in_flight_updates` off and once on, on
the embedded engine and on vLLM-CPU, with the same seeds and settings otherwise (`max_off_policy_steps` 1:
generation overlaps training, so weights change while replies run). Per engine and mode it prints the
median [min, max] over seeds of:

- `dropped`: groups dropped as stale per run; `tokens thrown`: their completion tokens;
- `steps/h`: steps per hour between the first and the last stored step (engine start-up left out);
- `s to reward`: seconds from launch to the first step whose mean train reward reached `--reward`;
- `reward/step`: the mean train reward over the run's steps;
- `token lag`: the mean over steps of `token_lag` (optimizer steps between the weights that sampled a trained
  token and the policy that trained on it); `versions/reply`: mean policy versions within one reply;
- `load`: the 1-minute load average when the run ended (the machine's other work shows here).

    .venv/bin/python bench/in_flight.py [--engines embedded vllm] [--seeds 0 1] [--steps 6] [--out runs/bench-in-flight]
    .venv/bin/python bench/in_flight.py --summarize runs/bench-in-flight/results.json   # again, no runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("dropped", "tokens thrown", "steps/h", "s to reward", "reward/step", "token lag", "versions/reply", "load")


def run_one(engine: str, in_flight: bool, seed: int, steps: int, out: Path, reward: float) -> dict[str, Any]:
    run_dir = out / f"{engine}-{'inflight' if in_flight else 'between'}-seed{seed}"
    args = [sys.executable, "-m", "looprl.cli", "rl", "@", "examples/demo/rl.toml",
            "--env.source", "bench/long_tail_env.py:LongTailEnv", "--output_dir", str(run_dir), "--seed", str(seed),
            "--max_steps", str(steps), "--orchestrator.batch_size", "16", "--orchestrator.group_size", "4",
            "--orchestrator.sampling.max_tokens", "96", "--orchestrator.eval.num_examples", "0",
            "--orchestrator.reward_weights", "{}", "--orchestrator.max_off_policy_steps", "1",
            "--orchestrator.in_flight_updates", str(in_flight).lower(), "--inference.backend", engine]
    started = time.time()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{run_dir} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    from looprl.store.reader import RunStoreReader

    reader = RunStoreReader(run_dir)
    rows = reader.steps(reader.run().run_id)
    reader.close()
    span = rows[-1]["time"] - rows[0]["time"]
    reached = next((r["time"] - started for r in rows if r.get("reward", 0.0) >= reward), None)
    lags = [r["token_lag"] for r in rows if "token_lag" in r]
    versions = [r["policy_versions_per_reply"] for r in rows if "policy_versions_per_reply" in r]
    return {"engine": engine, "in_flight": in_flight, "seed": seed,
            "dropped": sum(r.get("groups_dropped", 0.0) for r in rows),
            "tokens thrown": sum(r.get("tokens_dropped", 0.0) for r in rows),
            "steps/h": (len(rows) - 1) / span * 3600 if span > 0 else None,
            "s to reward": reached,
            "reward/step": statistics.fmean(r["reward"] for r in rows if "reward" in r),
            "token lag": statistics.fmean(lags) if lags else None,
            "versions/reply": statistics.fmean(versions) if versions else None,
            "load": os.getloadavg()[0]}


def cell(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "—"
    text = f"{statistics.median(known):.3g} [{min(known):.3g}, {max(known):.3g}]"
    return text + (f" ({len(values) - len(known)} none)" if len(known) < len(values) else "")


def summarize(results: list[dict[str, Any]]) -> str:
    lines = ["| engine | weight updates | seeds | " + " | ".join(COLUMNS) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |"]
    for engine in dict.fromkeys(r["engine"] for r in results):
        for in_flight in (False, True):
            runs = [r for r in results if r["engine"] == engine and r["in_flight"] == in_flight]
            if runs:
                mode = "in flight" if in_flight else "between replies"
                lines.append(f"| {engine} | {mode} | {len(runs)} | "
                             + " | ".join(cell([r[c] for r in runs]) for c in COLUMNS) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--engines", nargs="+", default=["embedded", "vllm"], choices=["embedded", "vllm"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--reward", type=float, default=0.25, help="the reward level `s to reward` times")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-in-flight")
    p.add_argument("--summarize", type=Path, help="print the table of a results.json, running nothing")
    args = p.parse_args()
    if args.summarize:
        print(summarize(json.loads(args.summarize.read_text())))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for engine in args.engines:
        for seed in args.seeds:
            for in_flight in (False, True):  # side by side: each seed's pair runs back to back
                results.append(run_one(engine, in_flight, seed, args.steps, args.out, args.reward))
                print(json.dumps(results[-1]), flush=True)
                (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(summarize(results))


if __name__ == "__main__":
    main()
