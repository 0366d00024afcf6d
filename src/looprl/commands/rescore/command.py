"""`looprl rescore RUN_DIR --env FILE:Class [--step N] [--split S] [--rollout ID] [--json]`: is my reward right?

Runs the (edited) env's `compute_reward` / `compute_group_rewards` on a run's stored rollouts,
grouped as they ran, and shows what changed: per component the mean before and after, how many
rollouts' totals changed, a few of them with the new reward code's log records, and the groups
left with a learning signal under the new advantages. `--json` prints one object per rollout.
Read-only: the run is never changed. Without `--env` the run's own env is re-run. The store is read
`GROUPS_PER_CHUNK` groups at a time and each rollout's transcript is let go of once it is re-scored,
so a run of any size fits in memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprl.utils.terminal import markup_safe, printable

if TYPE_CHECKING:
    from rich.console import Console

    from looprl.commands.rescore.rescoring import Rescored
    from looprl.config import OrchestratorConfig
    from looprl.store.records import RolloutRecord

GROUPS_PER_CHUNK = 256
"""Groups read, re-scored and let go of at a time: a run's transcripts are never all in memory at once."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--env", metavar="FILE:Class", help="the env whose reward code to run (default: the run's own)")
    p.add_argument("--step", type=int, help="only rollouts of this step")
    p.add_argument("--split", choices=["train", "eval"], help="only train or eval rollouts")
    p.add_argument("--rollout", metavar="ID", help="this rollout (its whole group is re-scored, as it ran)")
    p.add_argument("--examples", type=int, default=5, metavar="K", help="changed rollouts shown in detail (default 5)")
    p.add_argument("--concurrency", type=int, default=64, help="groups scored at once (default 64)")
    p.add_argument("--log-level", default="INFO", help="lowest level of the reward code's records kept (default INFO)")
    p.add_argument("--json", action="store_true", help="one JSON object per rollout: before, after, changed, logs")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from looprl.commands.rescore.rescoring import rescore
    from looprl.commands.stored import env_spec, load_rescoring_env, reward_settings
    from looprl.envs.base_env import BaseEnv
    from looprl.envserver.capture import install_capture
    from looprl.errors import UserError
    from looprl.store.reader import RolloutFilter, RunStoreReader

    for flag, value, least in (("--examples", args.examples, 0), ("--concurrency", args.concurrency, 1)):
        if value < least:
            raise UserError(f"{flag} must be at least {least}, not {value}")
    reader = RunStoreReader(args.run_dir)
    run_info = reader.run()
    if args.rollout:
        chunks: Iterator[list[RolloutRecord]] = iter([reader.siblings(reader.rollout(args.rollout).group_id)])
    else:
        chunks = reader.group_chunks(run_info.run_id, RolloutFilter(split=args.split, step=args.step),
                                     GROUPS_PER_CHUNK)
    first = next(chunks, [])
    if not first:
        raise UserError(f"no rollouts in {args.run_dir} match")
    env = load_rescoring_env(run_info, args.env)
    settings = reward_settings(run_info)
    install_capture(args.log_level)
    groups: list[list[Rescored]] = []
    examples: list[Rescored] = []

    def keep(group: list[Rescored]) -> None:
        """Print (`--json`) or note a re-scored group, keeping only what the report reads of it."""
        for item in group:
            if args.json:
                if not args.rollout or item.before.rollout_id == args.rollout:
                    print(json.dumps(_as_json(item), ensure_ascii=False))
            elif (item.before.rollout_id == args.rollout if args.rollout
                  else item.changed and len(examples) < args.examples):
                examples.append(item)
        if not args.json:
            groups.append([_without_texts(item) for item in group])

    async def rescore_and_close() -> None:
        try:
            records = first
            while records:
                if not isinstance(env, BaseEnv):  # it re-scores from the records its framework kept
                    traces = reader.native_traces([r.rollout_id for r in records])
                    records = [r.model_copy(update={"native_trace": traces.get(r.rollout_id)}) for r in records]
                for group in await rescore(env, records, settings, concurrency=args.concurrency):
                    keep(group)
                records = await asyncio.to_thread(next, chunks, [])
        finally:
            await env.aclose()

    asyncio.run(rescore_and_close())
    if args.json:
        return 0
    items = [item for group in groups for item in group]
    console = Console(highlight=False, soft_wrap=True)
    plural = "s" if len(groups) != 1 else ""
    console.print(f"re-scored {sum(i.rescored for i in items)} of {len(items)} rollouts ({len(groups)} group{plural}) "
                  f"of {markup_safe(run_info.run_id)} with {markup_safe(env_spec(run_info, args.env))}", style="bold")
    _component_table(console, items, settings)
    _counts(console, items, groups, settings)
    for item in examples:
        _example(console, item)
    return 0


def _without_texts(item: Rescored) -> Rescored:
    """The item without its transcript and log records: all the summary reads, a small part of a rollout."""
    from dataclasses import replace

    drop: dict[str, Any] = {"messages": [], "example_args": {}, "logs": []}
    return replace(item, before=item.before.model_copy(update=drop), after=item.after.model_copy(update=drop), logs=[])


def _component_table(console: Console, items: list[Rescored], settings: OrchestratorConfig) -> None:
    from rich.table import Table

    from looprl.session.rewards import reward_stats

    before = reward_stats([i.before for i in items], settings.reward_weights)
    after = reward_stats([i.after for i in items], settings.reward_weights)
    names = list(dict.fromkeys([k for k in [*before, *after] if k.startswith("reward/") and not k.endswith("_std")]))
    table = Table(title_justify="left")
    for col in ("component", "weight", "before", "after", "Δ"):
        table.add_column(col, justify="left" if col == "component" else "right")
    for key in [*names, "reward"]:
        name = key.removeprefix("reward/")
        old, new = before.get(key), after.get(key)
        weight = "" if key == "reward" else f"{settings.reward_weights.get(name, 1.0):g}"
        table.add_row("total" if key == "reward" else markup_safe(name, lines=False), weight, _num(old), _num(new),
                      _num(None if old is None or new is None else new - old, signed=True),
                      style="bold" if key == "reward" else None)
    console.print(table)


def _counts(console: Console, items: list[Rescored], groups: list[list[Rescored]],
            settings: OrchestratorConfig) -> None:
    from collections import Counter

    from looprl.session.advantages import batch_advantages

    changed = sum(i.changed for i in items)
    console.print(f"rollouts whose total changed: {changed} of {len(items)}")
    failing = Counter(i.after.termination_reason for i in items if i.rescored and not i.after.scored)
    if failing:
        console.print("now failing: " + markup_safe(", ".join(f"{reason} {n}" for reason, n in failing.items())),
                      style="red")
    kept = Counter(i.before.termination_reason for i in items if not i.rescored)
    if kept:
        console.print("not re-scored (failed before scoring): "
                      + markup_safe(", ".join(f"{r} {n}" for r, n in kept.items())), style="dim")
    old = batch_advantages([[i.before for i in g] for g in groups], settings)
    new_signal = sum(any(i.advantage for i in g) for g in groups)
    console.print(f"groups with a learning signal (a non-zero advantage): {sum(not a.skipped for a in old)} → "
                  f"{new_signal} of {len(groups)}")


def _example(console: Console, item: Rescored) -> None:
    from rich.text import Text

    from looprl.commands.logs import print_record

    console.print()
    line = Text(printable(f"rollout {item.before.rollout_id}", lines=False), style="bold")
    line.append(f"  total {_num(item.before.reward)} → {_num(item.reward)}")
    line.append(f"  advantage {_num(item.advantage, signed=True)}")
    console.print(line)
    for name in dict.fromkeys([*item.before.rewards, *item.after.rewards]):
        old, new = item.before.rewards.get(name), item.after.rewards.get(name)
        mark = "" if old == new else "  ← changed"
        console.print(Text(printable(f"  {name:<16} {_num(old)} → {_num(new)}{mark}", lines=False),
                           style="" if mark else "dim"))
    if item.after.error and item.after.error != item.before.error:
        console.print(Text(printable(f"  {item.after.termination_reason}: {item.after.error}"), style="red"))
    for rec in item.logs:
        print_record(console, item.before.rollout_id, rec)


def _as_json(item: Rescored) -> dict[str, Any]:
    b, a = item.before, item.after
    return {"rollout_id": b.rollout_id, "group_id": b.group_id, "example_id": b.example_id, "step": b.step,
            "split": b.split, "rescored": item.rescored, "changed": item.changed,
            "before": {"termination_reason": b.termination_reason, "rewards": b.rewards, "reward": b.reward,
                       "advantage": b.advantage, "error": b.error},
            "after": {"termination_reason": a.termination_reason, "rewards": a.rewards, "reward": item.reward,
                      "advantage": item.advantage, "error": a.error},
            "logs": [r.model_dump() for r in item.logs]}


def _num(value: float | None, signed: bool = False) -> str:
    if value is None or value != value:  # absent, or the mean of no rollouts (NaN)
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
