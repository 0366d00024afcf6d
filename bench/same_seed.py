"""Two runs of one config and seed, step by step: how long they sample alike.

`seed` fixes the examples each step draws and the random numbers each reply is sampled with
(docs/training.md#seeds), so two runs start alike; the engine's batches, formed by the clock, move the logits in
their last bits and the runs drift apart. This prints, per step both runs stored, each run's mean train reward,
the share of training replies the two sampled alike (the same example and the same completion tokens, counted as
a multiset) and whether the trainer's report (loss and grad norm) is the same to the bit ("nothing trained": no
group of the step had signal in either run):

    .venv/bin/python bench/same_seed.py RUN_A RUN_B

Runs for it: `bench/learning.py` with the same `--first-seed` on two cores at once (docs/benchmarks.md#seeds-two-
runs-of-one-seed-on-large_number-2026-12-07).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path


def replies(run: Path) -> dict[int, list[tuple[str, str, float | None]]]:
    """Each step's training replies: `(example id, completion token ids as stored, reward)`."""
    out: dict[int, list[tuple[str, str, float | None]]] = {}
    with closing(sqlite3.connect(run / "looprl.db")) as db:
        for step, example, tokens, reward in db.execute(
                "SELECT r.step, r.example_id, c.completion_token_ids, r.reward FROM rollouts r "
                "JOIN model_calls c USING (rollout_id) WHERE r.split = 'train'"):
            out.setdefault(step, []).append((example, tokens, reward))
    return out


def reports(run: Path) -> dict[int, tuple[float | None, float | None] | None]:
    """Each stored step's trainer loss and grad norm (None: the step had no samples, nothing trained)."""
    with closing(sqlite3.connect(run / "looprl.db")) as db:
        rows = db.execute("SELECT step, metrics FROM steps").fetchall()
    return {step: (m.get("train/loss"), m.get("train/grad_norm")) if m.get("samples") else None for step, m in
            ((step, json.loads(metrics)) for step, metrics in rows)}


def mean_reward(step_replies: list[tuple[str, str, float | None]]) -> float:
    return sum(r or 0.0 for *_, r in step_replies) / max(len(step_replies), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args()
    a, b = replies(args.run_a), replies(args.run_b)
    trained_a, trained_b = reports(args.run_a), reports(args.run_b)
    print(f"{'step':>4}  {'reward a':>8}  {'reward b':>8}  {'alike':>6}  trainer report")
    for step in sorted(set(a) & set(b)):
        both = Counter((e, t) for e, t, _ in a[step]) & Counter((e, t) for e, t, _ in b[step])
        alike = sum(both.values()) / max(len(a[step]), len(b[step]))
        report_a, report_b = trained_a.get(step), trained_b.get(step)
        said = ("nothing trained" if report_a is None and report_b is None else
                "same to the bit" if report_a == report_b else "differs")
        print(f"{step:>4}  {mean_reward(a[step]):>8.2f}  {mean_reward(b[step]):>8.2f}  {alike:>6.0%}  {said}")


if __name__ == "__main__":
    main()
