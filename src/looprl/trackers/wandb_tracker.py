"""Weights & Biases: offline by default (files under `{run_dir}/wandb/`, `wandb sync` uploads them)."""

from __future__ import annotations

from collections.abc import Mapping

from looprl.config import WandbTracker
from looprl.trackers.base import TrackedRun


class WandbRun:
    def __init__(self, settings: WandbTracker, info: TrackedRun) -> None:
        import wandb

        info.run_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=settings.project, entity=settings.entity, mode=settings.mode,
                              dir=str(info.run_dir), name=info.name, notes=info.links["inspector"],
                              config={**info.config, "looprl_links": info.links},
                              settings=wandb.Settings(console="off", silent=True), reinit="create_new")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def finish(self) -> None:
        self.run.finish()
