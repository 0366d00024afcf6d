"""`looprl rollouts RUN_DIR [--rollout ID] [--split S] [--step N] [--limit K] [--json]`: a run's rollouts.

A table of rollouts, or with `--rollout` one rollout's transcript: role-labelled messages, tool calls
and tool results set apart, then the reward breakdown, termination reason and error. `--json` prints
one object per rollout (the same fields either way), with `policy_versions`: per model call, the weights
version that sampled each completion token (null where the engine named none). Model and env text goes through
`looprl.utils.terminal`, so what a rollout contains cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprl.utils.terminal import markup_safe, printable

if TYPE_CHECKING:
    from rich.console import Console

    from looprl.store.records import RolloutRecord

JSON_FIELDS = ("rollout_id", "step", "split", "example_id", "group_id", "termination_reason", "error",
               "rewards", "reward", "advantage", "turns", "tool_calls", "prompt_tokens", "completion_tokens",
               "started_at", "finished_at", "messages")

ROLE_STYLES = {"system": "dim", "user": "bold cyan", "assistant": "bold green", "tool": "bold yellow"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--rollout", metavar="ID", help="this rollout's transcript")
    p.add_argument("--split", choices=["train", "eval"], help="only train or eval rollouts")
    p.add_argument("--step", type=int, help="only rollouts of this step")
    p.add_argument("--limit", type=int, default=10_000, help="at most this many rollouts (default 10000)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from looprl.errors import UserError
    from looprl.store.reader import RolloutFilter, RunStoreReader

    if args.limit < 1:  # SQLite reads a negative LIMIT as none: every rollout, transcripts and all
        raise UserError(f"--limit must be at least 1, not {args.limit}")
    reader = RunStoreReader(args.run_dir)
    run_info = reader.run()
    if args.rollout:
        rows = [reader.rollout(args.rollout)]
    else:
        rows, _ = reader.list_rollouts(run_info.run_id,
                                       RolloutFilter(split=args.split, step=args.step, limit=args.limit))
    if args.json:
        for r in rows:
            calls = r.model_calls or reader.model_calls(r.rollout_id)  # a listing reads no calls
            row = r.model_dump(include=set(JSON_FIELDS)) | {
                "policy_versions": [c.completion_policy_versions for c in calls]}
            print(json.dumps(row, ensure_ascii=False))
        return 0
    if args.rollout:
        transcript(Console(highlight=False, soft_wrap=True), rows[0])
        return 0
    table = Table(title=markup_safe(f"{run_info.run_id} · {run_info.env_name} · {run_info.model}", lines=False),
                  title_justify="left")
    for col in ("rollout", "step", "split", "example", "group", "reason", "reward", "components", "turns", "tokens",
                "s"):
        table.add_column(col, justify="right" if col in ("step", "reward", "turns", "tokens", "s") else "left",
                         no_wrap=col != "components")
    for r in rows:
        reason = markup_safe(r.termination_reason, lines=False)
        table.add_row(markup_safe(r.rollout_id, lines=False), str(r.step), r.split,
                      markup_safe(r.example_id[:8], lines=False), markup_safe(r.group_id[:8], lines=False),
                      reason if r.scored else f"[red]{reason}[/red]", "–" if r.reward is None else f"{r.reward:.3f}",
                      markup_safe(" ".join(f"{k}={v:g}" for k, v in r.rewards.items()), lines=False), str(r.turns),
                      str(r.prompt_tokens + r.completion_tokens), f"{r.duration_s:.1f}")
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # piped output: don't squeeze ids into ellipses
    console.print(table)
    return 0


def transcript(console: Console, r: RolloutRecord) -> None:
    """One rollout as a reader follows it: a header, the messages in order, then how it ended."""
    from rich.text import Text

    _header(console, r)
    for message in r.messages:
        console.print()
        role = str(message.get("role", "?"))
        label = Text(printable(role, lines=False), style=ROLE_STYLES.get(role, "bold"))
        if role == "tool":
            for part in (message.get("name"), message.get("tool_call_id") and f"← {message['tool_call_id']}"):
                if part:
                    label.append(printable(f" {part}", lines=False), style="yellow")
        console.print(label)
        text = _content(message.get("content"))
        if text:
            console.print(Text(printable(_indent(text))))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            console.print(Text(printable(f"  → tool call {function.get('name')}({function.get('arguments', '')})  "
                                         f"{call.get('id', '')}"), style="yellow"))
    console.print()
    _ending(console, r)


def rollout_summary(console: Console, r: RolloutRecord) -> None:
    """A rollout without its messages: the header, the last message's opening, how it ended."""
    from rich.text import Text

    _header(console, r)
    if r.messages:
        last = r.messages[-1]
        text = " ".join(_content(last.get("content")).split())
        calls = ", ".join(c.get("function", {}).get("name", "?") for c in last.get("tool_calls") or [])
        shown = (text[:120] + "…" if len(text) > 120 else text) or (f"→ {calls}" if calls else "")
        console.print(Text(printable(f"last message ({last.get('role', '?')}, {len(r.messages)} in all): {shown}"),
                           style="dim"))
    _ending(console, r)


def _header(console: Console, r: RolloutRecord) -> None:
    from rich.text import Text

    console.print(Text(printable(f"rollout {r.rollout_id} · {r.split} · step {r.step} · example {r.example_id} · "
                                 f"group {r.group_id}", lines=False), style="bold"))
    console.print(Text(f"turns {r.turns} · tool calls {r.tool_calls} · model calls {len(r.model_calls)} · tokens "
                       f"{r.prompt_tokens} prompt + {r.completion_tokens} completion · {r.duration_s:.1f} s · "
                       f"log records {r.log_count}", style="dim"))


def _ending(console: Console, r: RolloutRecord) -> None:
    from rich.text import Text

    ended = Text(printable(r.termination_reason, lines=False), style="green" if r.scored else "bold red")
    if r.reward is not None:
        ended.append(f" · reward {r.reward:.3f}")
    if r.advantage is not None:
        ended.append(f" · advantage {r.advantage:+.3f}")
    console.print(ended)
    for name, value in r.rewards.items():
        console.print(Text(printable(f"  {name:<16} {value:g}", lines=False)))
    if r.error:
        console.print(Text(printable(f"error: {r.error}"), style="red"))


def _content(content: Any) -> str:
    """A message's text: a string as is, content parts joined (text parts' text, others as JSON)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = content if isinstance(content, list) else [content]
    return "\n".join(p["text"] if isinstance(p, dict) and p.get("type") == "text" else json.dumps(p) for p in parts)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
