"""Each tracker in its offline/local mode, read back from what it wrote; a failing tracker warns once."""

import io
import json
from pathlib import Path

import pytest

from looprl.config import TrackersConfig, load_config
from looprl.config.run import LogConfig
from looprl.trackers import TrackedRun, Trackers, open_trackers
from looprl.utils.logger import reset_logger, setup_logger

CONFIG = {"max_steps": 2, "trainer": {"optim": {"lr": 1e-5}}}


def _run(tmp_path: Path, name: str, **settings) -> TrackedRun:
    info = TrackedRun(name="demo", run_dir=tmp_path / "run", run_id="abc123", config=CONFIG)
    trackers = open_trackers(TrackersConfig.model_validate({name: settings}), info)
    assert list(trackers.trackers) == [name]
    trackers.log(1, {"reward": 0.5, "train/loss": 0.25, "not_a_number": float("nan"), "label": "x"})
    trackers.log(2, {"reward": 0.75, "eval/reward": 1.0})
    trackers.finish()
    return info


def test_wandb_offline(tmp_path):
    pytest.importorskip("wandb")
    from tests.support.wandb_records import finished_records

    info = _run(tmp_path, "wandb")
    [path] = (info.run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    written = finished_records(path)
    [run] = [r.run for r in written if r.WhichOneof("record_type") == "run"]
    config = {i.key: json.loads(i.value_json) for i in run.config.update}
    assert config["trainer"] == {"optim": {"lr": 1e-5}}
    assert config["looprl_links"]["run_dir"] == str(info.run_dir.resolve())
    assert run.display_name == "demo" and "/runs/abc123" in run.notes
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
               for r in written if r.WhichOneof("record_type") == "history"]
    assert [(h["_step"], h["reward"]) for h in history] == [(1, 0.5), (2, 0.75)]
    assert history[0]["train/loss"] == 0.25 and history[1]["eval/reward"] == 1.0
    assert "not_a_number" not in history[0] and "label" not in history[0]


def test_mlflow_local_file_store(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    info = _run(tmp_path, "mlflow")
    client = MlflowClient(tracking_uri=(info.run_dir / "mlruns").resolve().as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("looprl").experiment_id])
    assert run.data.params["trainer.optim.lr"] == "1e-05"
    assert run.data.tags["looprl.run_dir"] == str(info.run_dir.resolve())
    assert "/runs/abc123" in run.data.tags["looprl.inspector"]
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "reward")] == [(1, 0.5), (2, 0.75)]
    assert client.get_metric_history(run.info.run_id, "eval/reward")[0].value == 1.0
    assert run.info.status == "FINISHED"


def test_trackio_local(tmp_path, monkeypatch):
    trackio = pytest.importorskip("trackio")
    from trackio import sqlite_storage

    for module in (trackio, trackio.utils, sqlite_storage):  # Trackio reads $TRACKIO_DIR once, at import
        monkeypatch.setattr(module, "TRACKIO_DIR", tmp_path / "trackio", raising=False)
    info = _run(tmp_path, "trackio", project="looprl-test")
    logs = sqlite_storage.SQLiteStorage.get_logs("looprl-test", "demo")
    assert [(row["step"], row["reward"]) for row in logs] == [(1, 0.5), (2, 0.75)]
    config = sqlite_storage.SQLiteStorage.get_run_config("looprl-test", "demo")
    assert config["trainer"] == {"optim": {"lr": 1e-5}}
    assert config["looprl_links"]["run_dir"] == str(info.run_dir.resolve())


def test_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    info = _run(tmp_path, "tensorboard")
    events = EventAccumulator(str(info.run_dir / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward")] == [(1, 0.5), (2, 0.75)]
    assert events.Scalars("eval/reward")[0].value == 1.0
    texts = {tag: events.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in events.Tags()["tensors"]}
    assert '"lr": 1e-05' in texts["config/text_summary"] and "/runs/abc123" in texts["links/text_summary"]


class Broken:
    calls = 0

    def log(self, step, metrics):
        Broken.calls += 1
        raise ConnectionError("server went away")

    def finish(self):
        raise AssertionError("a dropped tracker is not finished")


class Working:
    def __init__(self):
        self.steps = []

    def log(self, step, metrics):
        self.steps.append(step)

    def finish(self):
        self.steps.append("finished")


def test_a_failing_tracker_warns_once_and_the_others_go_on():
    sink = io.StringIO()
    setup_logger("info", sink=sink)
    try:
        working = Working()
        trackers = Trackers({"mlflow": Broken(), "tensorboard": working})
        for step in (1, 2, 3):
            trackers.log(step, {"reward": 1.0})
        trackers.finish()
    finally:
        reset_logger()
    assert working.steps == [1, 2, 3, "finished"]
    assert Broken.calls == 1
    assert sink.getvalue().count("tracker mlflow failed, the run goes on without it: ConnectionError") == 1


def test_a_tracker_that_cannot_start_is_left_out(tmp_path, monkeypatch):
    import looprl.trackers.group as group

    def missing(name, settings, info):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(group, "_start", missing)
    sink = io.StringIO()
    setup_logger("info", sink=sink)
    try:
        trackers = open_trackers(TrackersConfig.named(["wandb"]), TrackedRun("demo", tmp_path, "abc"))
    finally:
        reset_logger()
    assert trackers.trackers == {}
    assert "pip install 'looprl[wandb]'" in sink.getvalue()


def test_trackers_from_the_config():
    config = load_config(LogConfig, ["--trackers.wandb.project", "p", "--trackers.tensorboard.log_dir", "tb"])
    assert config.trackers.wandb is not None and config.trackers.wandb.mode == "offline"
    assert config.trackers.mlflow is None and config.trackers.tensorboard.log_dir == Path("tb")
