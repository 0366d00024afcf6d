"""Every run-directory path in one place (see ARCHITECTURE.md, "Run directory").

What the files under `steps/`, `checkpoints/` and `broadcasts/` hold, and when one is complete, is
`looprl.handoff`'s business; this module only names them.
"""

from __future__ import annotations

from pathlib import Path

DB_NAME = "looprl.db"


def db_path(run_dir: Path) -> Path:
    return Path(run_dir) / DB_NAME


def config_path(run_dir: Path) -> Path:
    return Path(run_dir) / "config.toml"


def secret_path(run_dir: Path) -> Path:
    """`run_secret`: the run secret the engines require (mode 0600; `looprl.handoff.engine_access`)."""
    return Path(run_dir) / "run_secret"


def logs_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "logs"


def log_path(run_dir: Path, process: str) -> Path:
    """`logs/{process}.log` for `trainer`, `orchestrator`, `inference`."""
    return logs_dir(run_dir) / f"{process}.log"


def torchrun_log_dir(run_dir: Path) -> Path:
    """`logs/trainer/torchrun/`: torchrun's `--log-dir`, per-rank stdout/stderr of every rank."""
    return logs_dir(run_dir) / "trainer" / "torchrun"


def env_log_dir(run_dir: Path, split: str, env_name: str) -> Path:
    return logs_dir(run_dir) / "envs" / split / env_name


def env_server_log_path(run_dir: Path, split: str, env_name: str) -> Path:
    return env_log_dir(run_dir, split, env_name) / "env_server.log"


def env_worker_log_path(run_dir: Path, split: str, env_name: str, worker_id: int) -> Path:
    return env_log_dir(run_dir, split, env_name) / f"env_worker_{worker_id}.log"


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return checkpoints_dir(run_dir) / f"step_{step}"


def broadcasts_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "broadcasts"


def broadcast_dir(run_dir: Path, step: int) -> Path:
    return broadcasts_dir(run_dir) / f"step_{step}"


def steps_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "steps"


def step_dir(run_dir: Path, step: int) -> Path:
    """`steps/step_N/`: the hand-off between orchestrator and trainer for step N."""
    return steps_dir(run_dir) / f"step_{step}"


def batch_path(run_dir: Path, step: int) -> Path:
    """`steps/step_N/batch.json`: step N's micro-batches, written by the orchestrator."""
    return step_dir(run_dir, step) / "batch.json"


def rollout_metrics_path(run_dir: Path, step: int) -> Path:
    """`steps/step_N/orchestrator.json`: the orchestrator's metrics of step N, kept until they are stored."""
    return step_dir(run_dir, step) / "orchestrator.json"


def trainer_report_path(run_dir: Path, step: int) -> Path:
    """`steps/step_N/trainer.json`: the trainer's metrics of step N."""
    return step_dir(run_dir, step) / "trainer.json"


def progress_path(run_dir: Path, step: int) -> Path:
    """`checkpoints/step_N/progress.json`: the orchestrator's progress saved with checkpoint N."""
    return checkpoint_dir(run_dir, step) / "progress.json"
