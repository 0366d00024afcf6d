"""The shared body of every `looprl rl` child process's entry point (`python -m looprl.trainer`, ...).

Reads the run's resolved `config.toml`, sets up the process logger, runs the process, and turns an
exception into a logged traceback and exit status 1, so the supervisor sees a clean non-zero exit.
It lives outside `launch` (the supervisor) because the processes it starts must not import it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from looprl.config import RLConfig, read_run_config
from looprl.utils.logger import setup_logger
from looprl.utils.private import make_files_private


def run_process(process: str, run_dir: Path, body: Callable[[RLConfig], object]) -> int:
    """Run `body(cfg)` as the `process` of the run in `run_dir`; 0 on success, 1 on failure."""
    make_files_private()  # already inherited from `looprl rl`; said again for a process a scheduler starts
    cfg = read_run_config(run_dir)
    log = setup_logger(cfg.log.level, cfg.log.json_logging, process=process)
    try:
        body(cfg)
    except Exception:
        log.exception(f"{process} failed")
        return 1
    return 0
