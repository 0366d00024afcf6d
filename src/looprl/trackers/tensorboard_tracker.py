"""TensorBoard: event files under `{run_dir}/tensorboard` by default; the config and the links as text."""

from __future__ import annotations

import json
from collections.abc import Mapping

from looprl.config import TensorboardTracker
from looprl.trackers.base import TrackedRun


class TensorboardRun:
    def __init__(self, settings: TensorboardTracker, info: TrackedRun) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(settings.log_dir or info.run_dir / "tensorboard"))
        self.writer.add_text("config", f"```\n{json.dumps(info.config, indent=2)}\n```", 0)
        self.writer.add_text("links", "\n\n".join(f"{k}: {v}" for k, v in info.links.items()), 0)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def finish(self) -> None:
        self.writer.close()
