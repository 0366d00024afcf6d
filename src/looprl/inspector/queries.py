"""Read-only SQL behind the inspector's analysis endpoints, on a `RunSource.connection()`.

Kept apart from `looprl.store.reader` (the CLI's reader) because only the inspector asks these:
siblings' final replies, search snippets, an example's history, reward histograms, model calls'
tokens. Every query is parameterised.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

SNIPPET_CONTEXT = 60


def rollout_head(conn: sqlite3.Connection, run_id: str, rollout_id: str) -> dict[str, Any] | None:
    """The few columns the explaining endpoints need of one rollout (with `trained_siblings`: how many of its group
    were stored with an advantage), or None when the run has no such rollout."""
    row = conn.execute("SELECT rollout_id, split, step, group_id, example_id, reward, advantage, rewards, "
                       "termination_reason, (SELECT COUNT(*) FROM rollouts s WHERE s.group_id = r.group_id AND "
                       "s.advantage IS NOT NULL) FROM rollouts r WHERE rollout_id=? AND run_id=?",
                       (rollout_id, run_id)).fetchone()
    if row is None:
        return None
    keys = ("rollout_id", "split", "step", "group_id", "example_id", "reward", "advantage", "rewards",
            "termination_reason", "trained_siblings")
    out = dict(zip(keys, row))
    out["rewards"] = json.loads(out["rewards"])
    return out


def group_members(conn: sqlite3.Connection, group_id: str) -> list[tuple[str, str, float | None, float | None]]:
    """`(rollout_id, termination_reason, reward, advantage)` of a group's rollouts, in write order."""
    return conn.execute("SELECT rollout_id, termination_reason, reward, advantage FROM rollouts WHERE group_id=? "
                        "ORDER BY rowid", (group_id,)).fetchall()


def final_replies(conn: sqlite3.Connection, group_id: str, chars: int = 240) -> dict[str, str]:
    """The start of each group member's last assistant message (its final reply)."""
    out = {}
    for rollout_id, messages in conn.execute("SELECT rollout_id, messages FROM rollouts WHERE group_id=?", (group_id,)):
        reply = next((m for m in reversed(json.loads(messages))
                      if m.get("role") == "assistant" and m.get("content")), None)
        out[rollout_id] = "" if reply is None else content_text(reply["content"])[:chars]
    return out


def content_text(content: Any) -> str:
    """A message's content as plain text (text parts joined; other parts as JSON)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) and p.get("type") == "text" else json.dumps(p)
                         for p in content)
    return "" if content is None else json.dumps(content)


def snippets(conn: sqlite3.Connection, rollout_ids: list[str], q: str) -> dict[str, tuple[str, str, int]]:
    """Per rollout, the first text `q` occurs in (case-insensitively): `(where, text, offset)`; messages
    first, then log records."""
    needle = q.lower()
    marks = ",".join("?" * len(rollout_ids))
    out: dict[str, tuple[str, str, int]] = {}
    for rollout_id, messages in conn.execute(f"SELECT rollout_id, messages FROM rollouts WHERE rollout_id IN ({marks})",
                                             rollout_ids):
        for i, m in enumerate(json.loads(messages)):
            texts = [content_text(m.get("content")),
                     *(json.dumps(c.get("function", c)) for c in m.get("tool_calls") or [])]
            hit = next(((t, t.lower().find(needle)) for t in texts if needle in t.lower()), None)
            if hit:
                out[rollout_id] = (f"message #{i + 1} ({m.get('role', '?')})", *hit)
                break
    rest = [r for r in rollout_ids if r not in out]
    if rest:
        marks = ",".join("?" * len(rest))
        for rollout_id, logger, message, exception in conn.execute(
                f"SELECT rollout_id, logger, message, COALESCE(exception, '') FROM rollout_logs "
                f"WHERE rollout_id IN ({marks}) ORDER BY time, id", rest):
            for text in (message, exception):
                if rollout_id not in out and needle in text.lower():
                    out[rollout_id] = (f"log record ({logger})", text, text.lower().find(needle))
    return out


def example_points(conn: sqlite3.Connection, run_id: str, example_id: str) -> list[tuple[str, int, str, float | None]]:
    """`(split, step, rollout_id, reward)` of every rollout of one example, by step."""
    return conn.execute("SELECT split, step, rollout_id, reward FROM rollouts WHERE run_id=? AND example_id=? "
                        "ORDER BY step, rowid", (run_id, example_id)).fetchall()


def reward_histogram(conn: sqlite3.Connection, run_id: str, split: str,
                     bins: int) -> tuple[float, float, dict[int, list[int]]]:
    """`(lo, hi, {step: counts})` of the split's scored rewards over `bins` equal bins."""
    lo, hi = conn.execute("SELECT MIN(reward), MAX(reward) FROM rollouts WHERE run_id=? AND split=?",
                          (run_id, split)).fetchone()
    if lo is None:
        return 0.0, 0.0, {}
    width = (hi - lo) / bins or 1.0
    counts: dict[int, list[int]] = {}
    for step, b, n in conn.execute(
            "SELECT step, MIN(CAST((reward - ?) / ? AS INTEGER), ?), COUNT(*) FROM rollouts "
            "WHERE run_id=? AND split=? AND reward IS NOT NULL GROUP BY 1, 2", (lo, width, bins - 1, run_id, split)):
        counts.setdefault(step, [0] * bins)[b] += n
    return lo, hi, counts


def model_call_tokens(conn: sqlite3.Connection, rollout_id: str) -> list[dict[str, Any]]:
    """Each model call's index, status, finish reason, token ids, sampler and trainer logprobs and the policy
    version of each token (None if not stored)."""
    rows = conn.execute(
        "SELECT idx, status, finish_reason, prompt_token_ids IS NOT NULL, completion_token_ids, completion_logprobs, "
        "trainer_logprobs, completion_policy_versions FROM model_calls WHERE rollout_id=? ORDER BY idx",
        (rollout_id,)).fetchall()
    keys = ("idx", "status", "finish_reason", "has_prompt_ids", "token_ids", "logprobs", "trainer_logprobs",
            "policy_versions")
    out = []
    for row in rows:
        call = dict(zip(keys, row))
        for key in ("token_ids", "logprobs", "trainer_logprobs", "policy_versions"):
            call[key] = None if call[key] is None else json.loads(call[key])
        out.append(call)
    return out


def no_signal_rollout(conn: sqlite3.Connection, run_id: str, step: int) -> str | None:
    """A train rollout of `step` that was scored but got no advantage (its group had no signal), or None."""
    row = conn.execute("SELECT rollout_id FROM rollouts WHERE run_id=? AND step=? AND split='train' AND "
                       "reward IS NOT NULL AND advantage IS NULL ORDER BY rowid LIMIT 1", (run_id, step)).fetchone()
    return None if row is None else row[0]


def run_config(conn: sqlite3.Connection, run_id: str) -> tuple[str, str, dict[str, Any]]:
    """The run's kind, model and resolved configuration."""
    kind, model, config = conn.execute("SELECT kind, model, config FROM runs WHERE run_id=?", (run_id,)).fetchone()
    return kind, model, json.loads(config or "{}")
