"""`looprl rollouts RUN_DIR [--rollout ID] [--json]`: a run's rollouts as a table or JSON lines."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

JSON_FIELDS = ("rollout_id", "step", "split", "example_id", "group_id", "termination_reason", "error",
               "rewards", "reward", "advantage", "turns", "tool_calls", "prompt_tokens", "completion_tokens",
               "started_at", "finished_at", "messages")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--rollout", help="only this rollout")
    p.add_argument("--split", choices=["train", "eval"])
    p.add_argument("--step", type=int)
    p.add_argument("--limit", type=int, default=10_000)
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from looprl.store.reader import RolloutFilter, RunStoreReader

    reader = RunStoreReader(args.run_dir)
    run_info = reader.run()
    if args.rollout:
        rows = [reader.rollout(args.rollout)]
    else:
        rows, _ = reader.list_rollouts(run_info.run_id, RolloutFilter(split=args.split, step=args.step, limit=args.limit))
    if args.json:
        for r in rows:
            print(json.dumps(r.model_dump(include=set(JSON_FIELDS)), ensure_ascii=False))
        return 0
    table = Table(title=f"{run_info.run_id} · {run_info.env_name} · {run_info.model}", title_justify="left")
    for col in ("rollout", "step", "split", "example", "group", "reason", "reward", "components", "turns", "tokens", "s"):
        table.add_column(col, justify="right" if col in ("step", "reward", "turns", "tokens", "s") else "left",
                         no_wrap=col != "components")
    for r in rows:
        reason = r.termination_reason if r.scored else f"[red]{r.termination_reason}[/red]"
        table.add_row(r.rollout_id, str(r.step), r.split, r.example_id[:8], r.group_id[:8], reason,
                      "–" if r.reward is None else f"{r.reward:.3f}",
                      " ".join(f"{k}={v:g}" for k, v in r.rewards.items()), str(r.turns),
                      str(r.prompt_tokens + r.completion_tokens), f"{r.duration_s:.1f}")
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # piped output: don't squeeze ids into ellipses
    console.print(table)
    return 0
