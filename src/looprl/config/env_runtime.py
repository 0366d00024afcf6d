"""How env code runs: the one value `looprl rl`, `looprl eval` and `looprl validate` hand to the env servers.

Each command builds an `EnvRuntimeConfig` once (`rl` from its `[env]` and `[log]` tables with
`RLConfig.env_runtime()`, `eval` and `validate` from their flags) and passes it whole:
`RolloutSession` -> `EnvServerHost` -> `EnvServer` -> each worker's `WorkerConfig`. No layer picks
fields out of it, so a setting one command honours, every command honours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from looprl.config.base import Strict

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class LogLimits(Strict):
    """Per-rollout bounds on captured env log records (`looprl.envserver.capture`): records past
    `max_records` are dropped and counted, longer messages and exceptions are cut and counted."""

    model_config = ConfigDict(frozen=True)

    max_records: int = Field(1000, ge=0)
    """Most log records kept per rollout."""
    max_message_chars: int = Field(4000, ge=1)
    """Longest message kept whole; longer ones end in `…[truncated]`."""
    max_exception_chars: int = Field(20000, ge=1)
    """Longest traceback kept whole (its end is kept)."""


class EnvSource(Strict):
    """Which environment, built how: what every env worker loads."""

    source: str
    """The environment class: `path/to/file.py:ClassName` or `package.module:ClassName`."""
    base_dir: Path | None = None
    """Dataset folder passed to `create_dataset` (default: `data/` beside the env file)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the env constructor."""
    workers: int = Field(1, ge=1)
    """Env worker processes per split (env code never runs in the orchestrator's process)."""
    max_tool_result_chars: int = Field(100_000, ge=1)
    """Longest tool result `BaseEnv` shows the model: a longer one keeps its first this many characters and
    ends in a marker saying how many were cut (the stored transcript holds what the model saw)."""
    max_transcript_chars: int = Field(4_000_000, ge=1)
    """Largest transcript a rollout may reach (its messages as JSON): past it the rollout ends as the
    operational failure `transcript_too_large`, with the messages that fit."""
    max_message_bytes: int = Field(1 << 30, ge=1 << 16)
    """Largest message between an env server and its workers (a group's results travel as one): a rollout
    whose result does not fit ends as `message_too_large`; the rest of its group and the run go on."""


class EnvRuntimeConfig(EnvSource):
    """The environment, its worker processes and their logging."""

    level: str = "INFO"
    """Level of env log records captured per rollout and written to the worker logs."""
    json_logging: bool = False
    """Write the env server and worker logs as JSON lines instead of text."""
    log_limits: LogLimits = Field(default_factory=LogLimits)
    """Per-rollout bounds on captured env log records."""
    timeout_grace_s: float = Field(5.0, ge=0)
    """A group still running `3 * timeout_s` plus this long after it was sent is killed with its worker."""
