"""Every run-directory path in one place (see ARCHITECTURE.md, "Run directory")."""

from __future__ import annotations

from pathlib import Path

DB_NAME = "looprl.db"


def db_path(run_dir: Path) -> Path:
    return Path(run_dir) / DB_NAME


def config_path(run_dir: Path) -> Path:
    return Path(run_dir) / "config.toml"


def logs_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "logs"


def log_path(run_dir: Path, process: str) -> Path:
    """`logs/{process}.log` for `trainer`, `orchestrator`, `inference`."""
    return logs_dir(run_dir) / f"{process}.log"


def env_log_dir(run_dir: Path, split: str, env_name: str) -> Path:
    return logs_dir(run_dir) / "envs" / split / env_name


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step}"


def broadcast_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "broadcasts" / f"step_{step}"
