"""`looprl replay RUN_DIR ROLLOUT_ID [--env FILE:Class] [--pdb]`: run one stored rollout again, here.

The rollout runs in the foreground through the env's normal path (`run_group`, `rollout_context`,
tools, rewards, log capture) on the example it ran on, while `recorded_replies` answers its model calls
with the replies the model gave (no engine). With the run's env unchanged, tool calls and rewards
execute exactly as they did; with an edited one (`--env`), the differences show. When the env has
`compute_group_rewards`, the siblings are replayed too, so the group is scored as it was. Prints the
new transcript's differences from the stored one, how it ended, the new rewards, where the replay
diverged from the recording, and the new log records. `--pdb` stops in the env's code on an
exception (a post-mortem in the frame that raised), before the runtime turns it into a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from looprl.utils.terminal import markup_safe, printable

if TYPE_CHECKING:
    from rich.console import Console

    from looprl.envs.types import Message, RolloutResult
    from looprl.store.records import RolloutRecord


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("rollout_id", metavar="ROLLOUT_ID")
    p.add_argument("--env", metavar="FILE:Class", help="the env to run (default: the run's own)")
    p.add_argument("--pdb", action="store_true", help="stop in the debugger where env code raises")
    p.add_argument("--log-level", default="INFO", help="lowest level of the env's records kept (default INFO)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from looprl.commands.replay.recorded_replies import Recording, ReplayServer, recorded_calls
    from looprl.commands.stored import env_spec, load_env, reward_settings, stored_example, transcript_caps
    from looprl.envs.base_env import BaseEnv
    from looprl.envs.runtime_api import has_group_reward_hook
    from looprl.envs.types import GroupRequest
    from looprl.envserver.capture import install_capture
    from looprl.store.reader import RunStoreReader

    reader = RunStoreReader(args.run_dir)
    run_info = reader.run()
    record = reader.rollout(args.rollout_id)
    env = load_env(run_info, args.env)
    group = [record]
    if isinstance(env, BaseEnv) and has_group_reward_hook(type(env)):
        group = [record if s.rollout_id == record.rollout_id else reader.rollout(s.rollout_id)
                 for s in reader.siblings(record.group_id)]
    if args.pdb:
        from looprl.commands.replay.post_mortem import stop_on_error

        stop_on_error(env)
    install_capture(args.log_level)
    recordings = {r.rollout_id: Recording(recorded_calls(r)) for r in group}
    with ReplayServer(recordings, run_info.model) as url_template:
        request = GroupRequest(group_id=record.group_id, example=stored_example(record), split=record.split,
                               rollout_ids=[r.rollout_id for r in group], model=run_info.model,
                               base_url_template=url_template)
        results = asyncio.run(_run_group(env, request, transcript_caps(run_info)))
    result = next(r for r in results if r.rollout_id == record.rollout_id)
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"replayed rollout {markup_safe(record.rollout_id)} of {markup_safe(run_info.run_id)} with "
                  f"{markup_safe(env_spec(run_info, args.env))}"
                  + (f" (and its {len(group) - 1} siblings, for group rewards)" if len(group) > 1 else ""),
                  style="bold")
    _transcript_diff(console, record.messages, result.messages)
    _outcome(console, record, result, reward_settings(run_info).reward_weights)
    recording = recordings[record.rollout_id]
    if recording.divergence is None and recording.served < len(recording.calls):
        recording.divergence = (f"the replay ended after {recording.served} of {len(recording.calls)} "
                                "recorded model calls")
    if recording.divergence:
        console.print(f"diverged from the recording at {markup_safe(recording.divergence)}", style="bold yellow")
    else:
        console.print(f"followed the recording: {recording.served} model calls, all as recorded", style="dim")
    _logs(console, result)
    return 0


async def _run_group(env, request, caps) -> list[RolloutResult]:
    from looprl.envs.runtime_api import aclose_pool
    from looprl.envserver.runtime import run_group_captured

    try:
        return await run_group_captured(env, request, caps=caps)
    finally:
        await env.aclose()
        await aclose_pool()


def _lines(messages: list[Message]) -> list[str]:
    """A transcript as diffable lines: each message's role, then its content and tool calls."""
    from looprl.commands.rollouts import _content

    out = []
    for i, m in enumerate(messages):
        out.append(f"[{i}] {m.get('role', '?')}" + (f" ← {m['tool_call_id']}" if m.get("tool_call_id") else ""))
        out += [f"    {line}" for line in _content(m.get("content")).splitlines()]
        for call in m.get("tool_calls") or []:
            function = call.get("function", {})
            out.append(f"    → {function.get('name')}({function.get('arguments', '')})")
    return out


def _transcript_diff(console: Console, stored: list[Message], new: list[Message]) -> None:
    import difflib

    from rich.text import Text

    if json.dumps(stored, sort_keys=True) == json.dumps(new, sort_keys=True):
        console.print(f"transcript: the same as the stored one ({len(new)} messages)")
        return
    console.print("transcript: differs from the stored one", style="yellow")
    for line in difflib.unified_diff(_lines(stored), _lines(new), "stored", "replay", lineterm="", n=2):
        style = ("green" if line.startswith("+") else "red" if line.startswith("-")
                 else "cyan" if line.startswith("@") else "")
        console.print(Text(printable(line), style=style))


def _outcome(console: Console, stored: RolloutRecord, new: RolloutResult, weights: dict[str, float]) -> None:
    from rich.table import Table
    from rich.text import Text

    from looprl.session.rewards import rollout_reward

    ended = Text(printable(f"ended: {stored.termination_reason}", lines=False))
    if new.termination_reason != stored.termination_reason:
        ended.append(printable(f" → {new.termination_reason}", lines=False), style="bold yellow")
    console.print(ended)
    table = Table(title_justify="left")
    for col in ("reward", "stored", "replay"):
        table.add_column(col, justify="left" if col == "reward" else "right")
    for name in dict.fromkeys([*stored.rewards, *new.rewards]):
        old, now = stored.rewards.get(name), new.rewards.get(name)
        table.add_row(markup_safe(name, lines=False), _num(old), _num(now), style=None if old == now else "yellow")
    table.add_row("total", _num(stored.reward), _num(rollout_reward(new, weights)), style="bold")
    console.print(table)
    if new.error:
        console.print(Text(printable(f"error: {new.error}"), style="red"))


def _logs(console: Console, result: RolloutResult) -> None:
    from looprl.commands.logs import print_record

    if not result.logs:
        console.print("no log records", style="dim")
        return
    console.print(f"log records ({len(result.logs)}):")
    for rec in result.logs:
        print_record(console, result.rollout_id, rec)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
