"""Trackio: a local run in Trackio's own store (`$TRACKIO_DIR`, default `~/.cache/huggingface/trackio`);
`trackio show` opens its dashboard."""

from __future__ import annotations

from collections.abc import Mapping

from looprl.config import TrackioTracker
from looprl.trackers.base import TrackedRun


class TrackioRun:
    def __init__(self, settings: TrackioTracker, info: TrackedRun) -> None:
        import trackio

        self.run = trackio.init(project=settings.project, name=info.name, embed=False, auto_log_cpu=False,
                                auto_log_gpu=False, config={**info.config, "looprl_links": info.links})

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def finish(self) -> None:
        self.run.finish()
