"""Experiment trackers (`[log.trackers]`): W&B, MLflow, Trackio, TensorBoard, each in its own module.

`open_trackers(config, info)` starts the configured ones and returns a `Trackers` that the
orchestrator (`looprl rl`: every stored step's metrics, eval results included) and `looprl eval`
(the summary) log to. A tracker is never a reason to stop training: one that fails to start or to
log is reported once, as a warning, and left out from then on.
"""

from looprl.trackers.base import TrackedRun, Tracker, inspector_link, inspector_url
from looprl.trackers.group import Trackers, open_trackers

__all__ = ["TrackedRun", "Tracker", "Trackers", "inspector_link", "inspector_url", "open_trackers"]
