"""`looprl metrics RUN_DIR [--json] [--all]`: a run's per-step training metrics.

The table shows the usual columns (reward and its components, pass rate, eval reward, loss, entropy,
mismatch KL, grad norm, throughput, step time); `--all` every metric the step recorded. `--json`
prints one object per step with every metric (`step`, `reward`, `reward/<component>`, `train/loss`,
...; names in `looprl.orchestrator.step_metrics`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

COLUMNS = ("reward", "pass_rate", "eval/reward", "completion_len", "groups_skipped", "groups_dropped", "train/loss",
           "train/entropy", "train/mismatch_kl", "train/grad_norm", "gen_tokens_per_s", "train/train_tokens_per_s",
           "step_time_s")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="one JSON object per step")
    p.add_argument("--all", action="store_true", help="every recorded metric as a column")


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2e}" if value and abs(value) < 1e-3 else f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from looprl.store.reader import RunStoreReader

    reader = RunStoreReader(args.run_dir)
    run_info = reader.run()
    steps = reader.steps(run_info.run_id)
    if args.json:
        for row in steps:
            print(json.dumps(row))
        return 0
    components = sorted({k for row in steps for k in row if k.startswith("reward/") and not k.endswith("_std")})
    columns = ["reward", *components, *COLUMNS[1:]]
    if args.all:
        columns = sorted({k for row in steps for k in row} - {"step", "time"})
    table = Table(title=f"{run_info.run_id} · {run_info.env_name} · {run_info.model} · {run_info.status}",
                  title_justify="left")
    table.add_column("step", justify="right")
    for col in columns:
        table.add_column(col.removeprefix("train/"), justify="right")
    for row in steps:
        table.add_row(str(row["step"]), *(_fmt(row.get(col)) for col in columns))
    console = Console()
    if not console.is_terminal:
        console = Console(width=250)
    console.print(table)
    if not steps:
        console.print("no steps recorded yet")
    return 0
