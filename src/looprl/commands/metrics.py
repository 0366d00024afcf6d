"""`looprl metrics RUN_DIR [--json] [--all]`: a run's per-step training metrics.

The table holds a short set of columns that fits 100 terminal columns (reward, eval reward, pass
rate, loss, entropy, mismatch KL, grad norm, skipped and dropped groups, the sampling temperature
when collapse recovery is on, generation tokens/s, step time); `--all` lists every metric the steps
recorded, one row per metric with the steps as columns, in as many chunks of steps as the width
needs. A step that did not train (every group skipped: the trainer got no samples) shows `–` for the
trainer's loss-side metrics instead of its zeros, and counts print as integers. Below the table, a
line per epoch says what the prompt ledger holds of it (`epoch 2: 312/500 examples trained, 4 dropped
stale, 11 filtered, 2 failed`; `looprl.store.ledger`). `--json` prints the stored object of each step
unchanged (`step`, `reward`, `reward/<component>`, `train/loss`, ...; names in
`looprl.orchestrator.step_metrics`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprl.utils.terminal import markup_safe

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod
    from rich.table import Table

COLUMNS = {"reward": "reward", "eval/reward": "eval", "pass_rate": "pass", "train/loss": "loss",
           "train/entropy": "entropy", "train/mismatch_kl": "kl", "train/grad_norm": "grad",
           "groups_skipped": "skip", "groups_dropped": "drop", "collapse/temperature": "temp",
           "train/lr": "lr", "gen_tokens_per_s": "gen tok/s", "step_time_s": "step s"}
"""The default table's metrics and their column headers; `OPTIONAL` ones only when some step recorded them."""

OPTIONAL = {"eval/reward": "eval/reward", "collapse/temperature": "collapse/temperature",
            "train/lr": "collapse/lr_scale"}
"""Columns shown only when some step recorded the metric each names: `eval` (a step evaluated), `temp` (the
sampling temperature collapse recovery set for the next groups, `[orchestrator.collapse]`), `lr` (the trainer's
learning rate, in runs whose collapse recovery rolls back and lowers it: `collapse/lr_scale`)."""

UNTRAINED = {"train/loss", "train/entropy", "train/mismatch_kl", "train/clipped_frac", "train/ref_kl",
             "train/entropy_bonus", "train/grad_norm"}
"""The trainer reports zeros for these when a step had no samples; they are shown as `–` then."""

COUNTS = {"rollouts", "failed", "groups_skipped", "groups_dropped", "rollouts_dropped", "prompt_tokens",
          "completion_tokens", "samples", "micro_batches", "tokens", "loss_tokens", "policy_version"}
"""Metrics that count things (stored as floats), also under `train/` and `eval/`."""

WIDTH = 100
"""Width of piped output, and the width the default table is made to fit."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="one JSON object per step, every metric")
    p.add_argument("--all", action="store_true", help="every recorded metric, one row per metric")


def is_count(name: str) -> bool:
    """Whether a metric counts things (stored as a float, shown as an integer)."""
    base = name.removeprefix("train/").removeprefix("eval/")
    return base in COUNTS or base.startswith(("termination/", "groups_"))


def trained(row: dict[str, Any]) -> bool:
    """Whether the trainer had samples at this step (older runs without the counts: assume so)."""
    return row.get("samples", row.get("train/loss_tokens", 1)) != 0


def value(row: dict[str, Any], name: str) -> Any:
    """A step's metric as shown: None where it was not recorded or the step did not train."""
    return None if name in UNTRAINED and not trained(row) else row.get(name)


def fmt(name: str, v: Any) -> str:
    """A value in at most 8 characters: counts whole, 3 decimals, 3 significant digits when small."""
    if v is None:
        return "–"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return markup_safe(str(v), lines=False)  # a table cell: rich markup
    if is_count(name) or isinstance(v, int):
        return str(round(v))
    size = abs(v)
    if size >= 100:
        return f"{v:.0f}"
    if size >= 0.1 or size == 0:
        return f"{v:.3f}"
    return f"{v:.3g}" if size >= 1e-3 else f"{v:.2e}"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from looprl.store.ledger import coverage
    from looprl.store.reader import RunStoreReader

    reader = RunStoreReader(args.run_dir)
    run_info = reader.run()
    steps = reader.steps(run_info.run_id)
    if args.json:
        for row in steps:
            print(json.dumps(row))
        return 0
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=WIDTH)
    console.print(markup_safe(f"{run_info.run_id} · {run_info.env_name} · {run_info.model} · {run_info.status}",
                              lines=False), soft_wrap=True)
    if not steps:
        console.print("no steps recorded yet")
    elif args.all:
        long_listing(console, steps)
    else:
        console.print(table(steps))
    for epoch in coverage(reader.ledger(run_info.run_id)):
        console.print(markup_safe(epoch.line(), lines=False), soft_wrap=True)
    return 0


def table(steps: Sequence[dict[str, Any]]) -> Table:
    """The default table: one row per step, the `COLUMNS` that any step recorded."""
    names = [n for n in COLUMNS if n not in OPTIONAL or any(OPTIONAL[n] in row for row in steps)]
    out = _table("step", [COLUMNS[n] for n in names])
    for row in steps:
        out.add_row(str(row["step"]), *(fmt(n, value(row, n)) for n in names))
    return out


def long_listing(console: Console, steps: Sequence[dict[str, Any]]) -> None:
    """Every metric, one row each, steps as columns; as many chunks of steps as the width needs."""
    names = sorted({k for row in steps for k in row} - {"step", "time"})
    cells = [[fmt(n, value(row, n)) for row in steps] for n in names]
    finished = [time.strftime("%H:%M:%S", time.localtime(row["time"])) for row in steps]
    label = max(len(n) for n in [*names, "finished at"])
    cell = max(len(c) for c in [*finished, *(x for r in cells for x in r)])
    per_chunk = max(1, (console.width - label) // (cell + 2))  # columns are 2 apart: a space and the rule's gap
    for start in range(0, len(steps), per_chunk):
        chunk = range(start, min(start + per_chunk, len(steps)))
        out = _table("step", [str(steps[i]["step"]) for i in chunk], label_justify="left")
        out.add_row("finished at", *(finished[i] for i in chunk))
        for name, row in zip(names, cells):
            out.add_row(markup_safe(name, lines=False), *(row[i] for i in chunk))
        if start:
            console.print()
        console.print(out)


def _table(label: str, headers: Sequence[str], label_justify: JustifyMethod = "right") -> Table:
    """A borderless table of right-aligned columns that never wrap, one space (and a gap) apart."""
    from rich import box
    from rich.table import Table

    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    out.add_column(label, justify=label_justify, no_wrap=True)
    for header in headers:
        out.add_column(header, justify="right", no_wrap=True)
    return out
