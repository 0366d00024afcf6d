"""The run's trackers together: start each configured one, log to all, keep going when one fails."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from looprl.config import TrackersConfig
from looprl.trackers.base import TrackedRun, Tracker, numeric
from looprl.utils.logger import get_logger

EXTRAS = {"wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio", "tensorboard": "tensorboard"}


def _start(name: str, settings: Any, info: TrackedRun) -> Tracker:
    """One tracker's session; imports its library (an optional extra) only when it is configured."""
    if name == "wandb":
        from looprl.trackers.wandb_tracker import WandbRun
        return WandbRun(settings, info)
    if name == "mlflow":
        from looprl.trackers.mlflow_tracker import MlflowRun
        return MlflowRun(settings, info)
    if name == "trackio":
        from looprl.trackers.trackio_tracker import TrackioRun
        return TrackioRun(settings, info)
    from looprl.trackers.tensorboard_tracker import TensorboardRun
    return TensorboardRun(settings, info)


class Trackers:
    """Logs to every tracker that works; one that raises is reported once and dropped."""

    def __init__(self, trackers: dict[str, Tracker] | None = None) -> None:
        self.trackers = trackers or {}

    def _each(self, call: Callable[[Tracker], None]) -> None:
        for name, tracker in list(self.trackers.items()):
            try:
                call(tracker)
            except Exception as e:  # a tracker must never stop a run
                del self.trackers[name]
                _warn(name, e)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        values = numeric(metrics)
        self._each(lambda t: t.log(step, values))

    def finish(self) -> None:
        self._each(lambda t: t.finish())
        self.trackers = {}


def _warn(name: str, error: BaseException) -> None:
    hint = f" (install it: pip install 'looprl[{EXTRAS[name]}]')" if isinstance(error, ImportError) else ""
    get_logger().warning("tracker {} failed, the run goes on without it: {}: {}{}", name, type(error).__name__,
                         error, hint)


def open_trackers(config: TrackersConfig, info: TrackedRun) -> Trackers:
    """Start every tracker `config` turns on; one that cannot start is reported and left out."""
    started: dict[str, Tracker] = {}
    for name in type(config).model_fields:
        settings = getattr(config, name)
        if settings is None:
            continue
        try:
            started[name] = _start(name, settings, info)
        except Exception as e:
            _warn(name, e)
    return Trackers(started)
