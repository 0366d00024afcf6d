"""End-of-run summaries: reward means per component (zero-filled) and in total, termination reason
counts, tokens and wall time — as a dict for the store and as a rich table for the terminal."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from looprl.envs.types import RolloutResult
from looprl.session.rewards import reward_stats
from looprl.utils.terminal import markup_safe


def summarize(results: Sequence[RolloutResult], wall_s: float,
              weights: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The run's summary; the total reward weighs components with `weights` (the run's `reward_weights`)."""
    scored = [r for r in results if r.scored]
    prompt = sum(getattr(r, "prompt_tokens", 0) for r in results)
    completion = sum(getattr(r, "completion_tokens", 0) for r in results)
    stats = {k: (None if isinstance(v, float) and math.isnan(v) else v)
             for k, v in reward_stats(results, weights).items()}
    return {
        "rollouts": len(results),
        "scored": len(scored),
        "failed": len(results) - len(scored),
        "rewards": stats,
        "termination_reasons": dict(Counter(r.termination_reason for r in results).most_common()),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "wall_s": round(wall_s, 3),
        "rollouts_per_s": round(len(results) / wall_s, 3) if wall_s > 0 else None,
    }


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    rewards = Table(title="Rewards", title_justify="left",
                    caption="means over scored rollouts; a missing component counts as 0", caption_justify="left")
    rewards.add_column("component")
    rewards.add_column("mean", justify="right")
    rewards.add_column("std", justify="right")
    stats = summary["rewards"]
    for key in [k for k in stats if k.startswith("reward/") and not k.endswith("_std")]:
        rewards.add_row(markup_safe(key.removeprefix("reward/"), lines=False), _fmt(stats[key]),
                        _fmt(stats.get(f"{key}_std")))
    rewards.add_row("[bold]total[/bold]", f"[bold]{_fmt(stats.get('reward'))}[/bold]", _fmt(stats.get("reward_std")))
    console.print(rewards)
    reasons = Table(title="Termination reasons", title_justify="left")
    reasons.add_column("reason")
    reasons.add_column("rollouts", justify="right")
    for reason, count in summary["termination_reasons"].items():
        reasons.add_row(markup_safe(reason, lines=False), str(count))
    console.print(reasons)
    console.print(
        f"{summary['rollouts']} rollouts ({summary['scored']} scored, {summary['failed']} failed) · "
        f"tokens: {summary['prompt_tokens']} prompt, {summary['completion_tokens']} completion · "
        f"wall {summary['wall_s']:.1f} s ({_fmt(summary['rollouts_per_s'])} rollouts/s)")
