"""What every tracker gets (`TrackedRun`) and does (`Tracker`), and the link back to the run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

INSPECTOR_PORT = 8765
"""`looprl inspect`'s default port: the link a tracker records assumes it."""


def inspector_url(run_id: str, rollout_id: str | None = None) -> str:
    """The run's page (or one rollout's) in the inspector, as `looprl inspect` serves it on its default port."""
    url = f"http://127.0.0.1:{INSPECTOR_PORT}/runs/{run_id}"
    return f"{url}/rollouts/{rollout_id}" if rollout_id else url


def inspector_link(run_dir: Path, run_id: str, rollout_id: str | None = None) -> str:
    """`inspector_url` and the command that serves it."""
    return f"{inspector_url(run_id, rollout_id)} (looprl inspect {run_dir})"


@dataclass
class TrackedRun:
    """The run a tracker records: its name, directory and store id, config, and links back to it."""

    name: str
    run_dir: Path
    run_id: str
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def links(self) -> dict[str, str]:
        return {"run_dir": str(self.run_dir.resolve()), "inspector": inspector_link(self.run_dir.resolve(),
                                                                                     self.run_id)}


class Tracker(Protocol):
    """One experiment tracker's session for one run."""

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def finish(self) -> None: ...


def numeric(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics object (trackers reject or mis-plot the rest)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: trackers whose parameters are flat key/value pairs."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
