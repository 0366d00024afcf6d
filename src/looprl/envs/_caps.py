"""Size caps on what a rollout keeps: one tool result, and the whole transcript.

A tool that returns 10 MB, or a loop that appends tool output turn after turn, must not cost the run its
memory or its store. The runtime sets the caps of the run (`env.max_tool_result_chars`,
`env.max_transcript_chars`) around each group with `capped_to`; `BaseEnv`'s chat loop reads them:

- a tool result longer than its cap keeps its first `max_tool_result_chars` characters and ends in a
  marker saying how many were cut; the model reads that text and the transcript stores it, and the
  rollout's log gets a warning;
- a transcript (its messages as JSON) past `max_transcript_chars` ends the rollout as the operational
  failure `transcript_too_large`; the runtime holds every environment's results to the same cap
  (`looprl.envserver.runtime`).

Outside a runtime (a unit test calling `run_group` itself) nothing is capped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

TRANSCRIPT_TOO_LARGE = "transcript_too_large"

logger = logging.getLogger("looprl.envs")


@dataclass(frozen=True)
class TranscriptCaps:
    max_tool_result_chars: int | None = None
    max_transcript_chars: int | None = None


NO_CAPS = TranscriptCaps()
_caps: ContextVar[TranscriptCaps | None] = ContextVar("looprl_transcript_caps", default=None)


@contextmanager
def capped_to(caps: TranscriptCaps) -> Iterator[None]:
    """Hold the rollouts run inside the block to `caps`."""
    token = _caps.set(caps)
    try:
        yield
    finally:
        _caps.reset(token)


def current_caps() -> TranscriptCaps:
    return _caps.get() or NO_CAPS


def message_chars(message: Any) -> int:
    """A message's size as compact JSON (what travels to the env server and the store)."""
    return len(json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=repr))


def transcript_chars(messages: list[Any]) -> int:
    return sum(message_chars(m) for m in messages)


def transcript_error(size: int, limit: int) -> str:
    return (f"the transcript reached {size:,} characters, over its cap of {limit:,} (env.max_transcript_chars); "
            "raise the cap, or bound what the env adds to it (env.max_tool_result_chars, max_turns)")


def cut_tool_result(name: str, text: str, limit: int | None) -> str:
    """`text`, or its first `limit` characters and a marker when it is longer (logged as a warning)."""
    if limit is None or len(text) <= limit:
        return text
    cut = len(text) - limit
    logger.warning("the result of tool %r was cut to its first %d of %d characters (env.max_tool_result_chars)",
                   name, limit, len(text))
    return (f"{text[:limit]}\n…[truncated: {cut:,} of {len(text):,} characters cut; the tool result cap is "
            f"{limit:,} characters]")
