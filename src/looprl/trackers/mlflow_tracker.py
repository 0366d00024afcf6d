"""MLflow: a run in the local file store `{run_dir}/mlruns` by default (or any tracking server).

MLflow 3 keeps its file store in maintenance mode and refuses it unless `MLFLOW_ALLOW_FILE_STORE`
is set; looprl sets it for the default store (a local directory needs no database server; the
optional extra is `mlflow-skinny`, which has no SQL backend). The run config goes in as flat
parameters (`trainer.optim.lr`) and whole as the artifact `config.json`; the links back are tags
(`looprl.run_dir`, `looprl.inspector`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from looprl.config import MlflowTracker
from looprl.trackers.base import TrackedRun, flatten

PARAMS_PER_CALL = 100  # MLflow's limit per log_batch
PARAM_CHARS = 6000  # MLflow's limit on a parameter's value


class MlflowRun:
    def __init__(self, settings: MlflowTracker, info: TrackedRun) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = settings.tracking_uri
        if uri is None:
            uri = (info.run_dir.resolve() / "mlruns").as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(settings.experiment)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else self.client.create_experiment(settings.experiment))
        tags = {"mlflow.runName": info.name, **{f"looprl.{k}": v for k, v in info.links.items()}}
        self.run_id = self.client.create_run(experiment_id, tags=tags, run_name=info.name).info.run_id
        params = [Param(k, str(v)[:PARAM_CHARS]) for k, v in flatten(info.config).items()]
        for i in range(0, len(params), PARAMS_PER_CALL):
            self.client.log_batch(self.run_id, params=params[i:i + PARAMS_PER_CALL])
        self.client.log_dict(self.run_id, info.config, "config.json")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def finish(self) -> None:
        self.client.set_terminated(self.run_id)
