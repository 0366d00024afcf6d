"""`looprl logs RUN_DIR [--rollout ID] [--level L] [--json]`: captured env log records on the terminal.

One record a line, never wrapped (piped into grep, a line is a record); no records is said on
stderr, so an empty run is not mistaken for a broken command. With `--rollout`, the records follow
a summary of the rollout (what it ran on, how it ended, its error), so one command says what
happened to it. A record's text goes through `looprl.utils.terminal`: it cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from looprl.envs.types import LogRecordData

LEVEL_STYLES = {"DEBUG": "dim", "INFO": "cyan", "WARNING": "yellow", "ERROR": "red", "CRITICAL": "bold red"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--rollout", help="only this rollout's records")
    p.add_argument("--level", default="DEBUG", help="lowest level shown (DEBUG, INFO, WARNING, ERROR)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def _level(name: str) -> int:
    from looprl.errors import UserError

    value = logging.getLevelName(name.upper())
    if not isinstance(value, int):
        raise UserError(f"unknown --level {name!r}; expected DEBUG, INFO, WARNING, ERROR or CRITICAL")
    return value


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from looprl.commands.rollouts import rollout_summary
    from looprl.store.reader import RunStoreReader

    reader = RunStoreReader(args.run_dir)
    level = _level(args.level)
    if args.rollout:
        reader.rollout(args.rollout)  # a clear error for an unknown id
        pairs = [(args.rollout, rec) for rec in reader.logs(rollout_id=args.rollout, min_level=level)]
    else:
        pairs = reader.logs_with_rollout(reader.run().run_id, level)
    if not pairs:
        at = "" if level <= logging.DEBUG else f" at {logging.getLevelName(level)} or above"
        where = f"for rollout {args.rollout}" if args.rollout else "in this run"
        print(f"no log records{at} {where}", file=sys.stderr)
        return 0
    console = Console(highlight=False, soft_wrap=True)
    if args.rollout and not args.json:
        rollout_summary(console, reader.rollout(args.rollout))
        console.print()
    for rollout_id, rec in pairs:
        if args.json:
            print(json.dumps({"rollout_id": rollout_id, **rec.model_dump()}, ensure_ascii=False))
            continue
        print_record(console, rollout_id, rec)
    return 0


def print_record(console: Console, rollout_id: str, rec: LogRecordData) -> None:
    """One record on one line (its traceback, if any, below it)."""
    from looprl.utils.terminal import markup_safe

    stamp = time.strftime("%H:%M:%S", time.localtime(rec.time)) + f".{int(rec.time * 1000) % 1000:03d}"
    style = LEVEL_STYLES.get(rec.level_name, "default")
    console.print(f"{stamp} [{style}]{markup_safe(f'{rec.level_name:<8}', lines=False)}[/{style}] "
                  f"[magenta]{markup_safe(rollout_id, lines=False)}[/magenta] "
                  f"[dim]{markup_safe(rec.logger, lines=False)}:{rec.lineno}[/dim] {markup_safe(rec.message)}")
    if rec.exception:
        console.print(f"[red]{markup_safe(rec.exception)}[/red]")
