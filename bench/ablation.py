"""An ablation of looprl's learning options: `bench/learning.py --systems looprl` once per row, one table.

Each row is a named set of `looprl rl` overrides (`ROWS`), run for `--seeds` seeds of at most
`--budget-s` seconds each on `--task`, one after the other; a seed stops early once a step's train
reward reached 95 % of the maximum (the last level measured). The table gives, per row, the seconds
and the steps until a step's reward first reached 50 / 80 / 95 % of the maximum (with `--window 3`:
the mean reward of 3 steps in a row, for the early stop too; on a yes/no task such as `large_number`,
a policy that always answers alike gets a perfect step whenever the step's 4 prompts happen to
suit it, so one step says nothing there): the median, the worst seed (a seed that never got there is
the worst, shown as `never`) and how many seeds got there. A default that is fast on the median but
leaves one seed behind is not better, so the table is sorted by the worst seed's seconds to 80 %. It
also writes a PNG: each seed's seconds to 80 % per row, and each row's median reward against steps.

Rows already measured (same task, seeds and budget under `--out`) are kept, so the ablation can be
run piecewise, each part on a quiet machine:

    .venv/bin/python bench/ablation.py --task two_digit --seeds 5 --budget-s 300 [--rows default,cispo]
    .venv/bin/python bench/ablation.py --task two_digit --seeds 5 --budget-s 300 --summarize   # no runs
    .venv/bin/python bench/ablation.py --task large_number --window 3 --seeds 5 --budget-s 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import learning

# name -> (`looprl rl` overrides, what it tests)
ROWS: dict[str, tuple[str, str]] = {
    "default": ("", "the library's defaults (truncated ratio, per-token mean, std-scaled advantages)"),
    "cispo": ("--trainer.loss.ratio.type cispo", "CISPO: clipped stop-gradient IS weight"),
    "gspo": (
        "--trainer.loss.ratio.type gspo --trainer.loss.normalization per_sequence",
        "GSPO: one clipped ratio per sequence",
    ),
    "dynamic_sampling": (
        "--orchestrator.dynamic_sampling.max_extra_groups 4",
        "DAPO's dynamic sampling, up to 4 extra groups a step",
    ),
    "tis": ("--trainer.loss.correction.type tis", "rollout correction: token-level truncated IS"),
    "clip_higher": (
        "--trainer.loss.ratio.type clipped --trainer.loss.ratio.eps_high 0.28",
        "PPO clip with DAPO's clip-higher bounds [0.8, 1.28]",
    ),
    "kl": ("--trainer.loss.kl_coef 0.05", "KL penalty to the initial model, 0.05"),
    "lr_1e-5": ("--trainer.optim.lr 1e-5", "half the learning rate"),
    "lr_decay": (
        "--trainer.optim.schedule cosine --trainer.optim.min_lr_ratio 0.1 --max_steps 60",
        "cosine decay of the learning rate to a tenth at step 60 (the run ends there)",
    ),
    "entropy": ("--trainer.loss.entropy_coef 0.01", "entropy bonus, 0.01"),
}


def row_dir(args: argparse.Namespace, name: str) -> Path:
    return Path(args.out) / name / args.task


def measured(args: argparse.Namespace, name: str) -> dict[str, Any] | None:
    path = row_dir(args, name) / "results.json"
    if not path.exists():
        return None
    results = json.loads(path.read_text())
    same = (
        results["budget_s"] == args.budget_s
        and results["seeds"] == args.seeds
        and results.get("looprl_args") == ROWS[name][0]
        and results.get("stop_window", 1) == args.window
    )
    return results if same else None


def run_row(args: argparse.Namespace, name: str) -> None:
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("learning.py")),
            "--tasks",
            args.task,
            "--seeds",
            str(args.seeds),
            "--budget-s",
            str(args.budget_s),
            "--systems",
            "looprl",
            "--stop-at",
            "0.95",
            "--stop-window",
            str(args.window),
            "--out",
            str(Path(args.out) / name),
            "--looprl-args",
            ROWS[name][0],
        ],
        check=True,
    )


def level_cells(runs: list[list[learning.Point]], level: float, window: int) -> tuple[str, float]:
    """`median s / steps; worst` for one level, and the worst seed's seconds (inf: a seed never got there)."""
    hits = [learning.first_reached(points, level, window) for points in runs]
    seconds = [h[0] if h else float("inf") for h in hits]
    steps = [h[1] if h else float("inf") for h in hits]

    def show(value: float) -> str:
        return "never" if value == float("inf") else f"{value:.0f}"

    got = sum(h is not None for h in hits)
    cell = (
        f"{show(statistics.median(seconds))} / {show(statistics.median(steps))}; worst"
        f" {show(max(seconds))} / {show(max(steps))} ({got}/{len(runs)})"
    )
    return cell, max(seconds)


def table(args: argparse.Namespace, rows: dict[str, dict[str, Any]]) -> list[str]:
    top = learning.max_reward(args.task)
    lines = [
        f"task {args.task} (maximum {top:g}), {args.seeds} seeds per row, budget {args.budget_s:.0f} s a seed;"
        f" seconds / steps until {'a step' if args.window == 1 else f'{args.window} steps in a row'}'s mean train"
        " reward first reached each level: median; worst seed (seeds there)",
        "| row | overrides | "
        + " | ".join(f"{share:.0%} ({share * top:.2f})" for share in learning.LEVELS)
        + " | load average |",
        "| --- | --- | " + " | ".join("---" for _ in learning.LEVELS) + " | --- |",
    ]
    ordered = []
    for name, results in rows.items():
        cells = [level_cells(results["runs"]["looprl"], share * top, args.window) for share in learning.LEVELS]
        ordered.append((cells[1][1], cells[1][0], name, cells, results))
    for _, _, name, cells, results in sorted(ordered, key=lambda r: (r[0], r[1])):
        overrides = ROWS[name][0] or "(none)"
        lines.append(
            f"| {name} | `{overrides}` | "
            + " | ".join(c for c, _ in cells)
            + f" | {results['load_average']['looprl']} |"
        )
    return lines


def plot(args: argparse.Namespace, rows: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = learning.max_reward(args.task)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    names = list(rows)
    for y, name in enumerate(names):
        runs = rows[name]["runs"]["looprl"]
        hits = [learning.first_reached(points, 0.8 * top, args.window) for points in runs]
        xs = [h[0] if h else args.budget_s for h in hits]
        left.scatter(xs, [y] * len(xs), color=["C0" if h else "C3" for h in hits], zorder=3)
        left.plot([statistics.median(xs)] * 2, [y - 0.3, y + 0.3], color="k")
        longest = max(len(p) for p in runs)
        median_curve = [statistics.median(p[i][2] for p in runs if len(p) > i) for i in range(longest)]
        right.plot(range(1, longest + 1), median_curve, label=name)
    left.set_yticks(range(len(names)), names)
    left.set_xlabel(f"seconds to 80 % (red: not reached in {args.budget_s:.0f} s; bar: median)")
    left.grid(alpha=0.3)
    right.axhline(0.8 * top, color="grey", lw=0.6, ls="--")
    right.set_xlabel("step")
    right.set_ylabel("median over seeds of the step's train reward")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.suptitle(f"{args.task}: {args.seeds} seeds per row")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(learning.TASKS), default="two_digit")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=300)
    parser.add_argument("--window", type=int, default=1, help="levels are reached by the mean of this many steps"
                        " in a row (3 on a yes/no task such as large_number)")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    parser.add_argument("--out", default="runs/ablation")
    parser.add_argument("--summarize", action="store_true", help="print the table of the rows measured, run nothing")
    args = parser.parse_args()
    names = args.rows.split(",")
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    for name in names:
        if not args.summarize and measured(args, name) is None:
            run_row(args, name)
    rows = {name: r for name in names if (r := measured(args, name)) is not None}
    print("\n".join(table(args, rows)))
    if rows:
        path = Path(args.out) / f"ablation-{args.task}.png"
        plot(args, rows, path)
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
