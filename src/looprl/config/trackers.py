"""Experiment trackers a run also logs to (`[log.trackers]`): each table present turns one on.

    [log.trackers.wandb]        project = "looprl", mode = "offline"
    [log.trackers.mlflow]       tracking_uri = "file:/abs/mlruns"     (default: `{output_dir}/mlruns`)
    [log.trackers.trackio]      project = "looprl"
    [log.trackers.tensorboard]  log_dir = "tb"                        (default: `{output_dir}/tensorboard`)

Each is an optional extra (`pip install 'looprl[wandb]'`, `[mlflow]`, `[trackio]`, `[tensorboard]`);
every default writes locally, without network. Pydantic only: `looprl.trackers` does the logging.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from looprl.config.base import Strict, Url


class WandbTracker(Strict):
    project: str = "looprl"
    """W&B project."""
    entity: str | None = None
    """W&B team or user (None: the account's default)."""
    mode: Literal["offline", "online"] = "offline"
    """`offline` writes under `{output_dir}/wandb/` (upload later with `wandb sync`); `online` needs a login."""


class MlflowTracker(Strict):
    tracking_uri: Url | None = None
    """Where runs are recorded (None: the local file store `{output_dir}/mlruns`; or a server's URL, whose
    credentials come from `MLFLOW_TRACKING_USERNAME`/`_PASSWORD` or `_TOKEN`, never the URL)."""
    experiment: str = "looprl"
    """MLflow experiment the run is created in."""


class TrackioTracker(Strict):
    project: str = "looprl"
    """Trackio project (stored locally in Trackio's own directory, `$TRACKIO_DIR`)."""


class TensorboardTracker(Strict):
    log_dir: Path | None = None
    """Event file directory (None: `{output_dir}/tensorboard`)."""


class TrackersConfig(Strict):
    wandb: WandbTracker | None = None
    """`[log.trackers.wandb]`: log to Weights & Biases."""
    mlflow: MlflowTracker | None = None
    """`[log.trackers.mlflow]`: log to MLflow."""
    trackio: TrackioTracker | None = None
    """`[log.trackers.trackio]`: log to Trackio."""
    tensorboard: TensorboardTracker | None = None
    """`[log.trackers.tensorboard]`: write TensorBoard event files."""

    @classmethod
    def named(cls, names: list[str]) -> TrackersConfig:
        """Each named tracker with its defaults (`looprl eval --tracker NAME`)."""
        return cls.model_validate({name: {} for name in names})


TRACKER_NAMES = list(TrackersConfig.model_fields)
