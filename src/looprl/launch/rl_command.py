"""`looprl rl @ CONFIG.toml [--key.sub VALUE ...] [--dry-run] [--resume]`: a whole training run.

Validates the config, writes the resolved `config.toml` into `output_dir` (`--dry-run` stops there),
starts the inference engine, then the orchestrator and the trainer as child processes, each with its
output in `logs/<process>.log`, and supervises them: when one fails the others are stopped, the
command exits 1 and prints the tail of the failing log; Ctrl-C stops them all.

`--resume` continues a run from its latest checkpoint k: files of later steps (hand-off files and
broadcasts) are removed, the orchestrator deletes store rows after step k, both processes go on at k+1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

FLAGS = ("--dry-run", "--resume")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="write the resolved config.toml and exit")
    parser.add_argument("--resume", action="store_true", help="continue the run in output_dir from its latest checkpoint")
    parser.add_argument("config", nargs=argparse.REMAINDER, metavar="@ CONFIG.toml [--key.sub VALUE ...]",
                        help="config files (deep-merged left to right), then dotted overrides")


def run(args: argparse.Namespace) -> int:
    import tomli_w

    from looprl.config import load_config
    from looprl.errors import UserError
    from looprl.launch.config import RLConfig
    from looprl.store.paths import config_path, db_path

    argv = [a for a in args.config if a not in FLAGS]
    dry_run = args.dry_run or "--dry-run" in args.config
    resume = args.resume or "--resume" in args.config
    cfg = load_config(RLConfig, argv)
    run_dir = cfg.output_dir
    if dry_run:
        run_dir.mkdir(parents=True, exist_ok=True)
        config_path(run_dir).write_text(tomli_w.dumps(cfg.to_toml_dict()))
        print(f"wrote {config_path(run_dir)}")
        return 0
    resume_step = 0
    if resume:
        resume_step = resumable_step(run_dir)
    elif db_path(run_dir).exists():
        raise UserError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another output_dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path(run_dir).write_text(tomli_w.dumps(cfg.to_toml_dict()))
    return launch(cfg, run_dir, resume_step)


def resumable_step(run_dir: Path) -> int:
    """The latest checkpoint step, with every file of later steps removed."""
    from looprl.errors import UserError
    from looprl.store.paths import broadcast_dir, checkpoint_dir, step_dir

    steps = [int(p.name.removeprefix("step_")) for p in checkpoint_dir(run_dir, 0).parent.glob("step_*")
             if (p / "progress.json").is_file()]
    if not steps:
        raise UserError(f"{run_dir} has no checkpoint to resume from")
    step = max(steps)
    for path in (step_dir(run_dir, 0).parent, broadcast_dir(run_dir, 0).parent):
        for stale in path.glob("step_*"):
            if stale.name.removeprefix("step_").isdigit() and int(stale.name.removeprefix("step_")) > step:
                shutil.rmtree(stale, ignore_errors=True)
    return step


def launch(cfg, run_dir: Path, resume_step: int) -> int:  # type: ignore[no-untyped-def]
    from looprl.inference.process import EngineProcess
    from looprl.launch.supervisor import Child, python_module, stop_all, tail, watch
    from looprl.store.paths import log_path

    resume = ["--resume-step", str(resume_step)]
    print(f"looprl rl: run directory {run_dir} (logs in {log_path(run_dir, '*')})" +
          (f", resuming after step {resume_step}" if resume_step else ""), flush=True)
    engine = EngineProcess(cfg.model.name, log_path=log_path(run_dir, "inference"),
                           extra_args=["--max-batch-size", str(cfg.inference.max_batch_size)])
    children: list[Child] = []
    try:
        with engine:
            orchestrator = Child("orchestrator", log_path(run_dir, "orchestrator")).start(python_module(
                "looprl.orchestrator", str(run_dir), "--engine-url", engine.url, "--model-name", engine.model_name, *resume))
            trainer = Child("trainer", log_path(run_dir, "trainer")).start(
                python_module("looprl.trainer", str(run_dir), *resume))
            children = [EngineChild(engine), orchestrator, trainer]
            failed = watch(children, until_done=[orchestrator, trainer])
            stop_all(children)
            if failed is not None:
                status = failed.process.poll() if failed.process else None
                print(f"looprl rl: {failed.name} exited with status {status}; last lines of {failed.log_path}:\n"
                      f"{tail(failed.log_path)}", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        stop_all(children)
        raise
    print(f"looprl rl: done. Look at the run with:\n  looprl metrics {run_dir}\n  looprl inspect {run_dir}")
    return 0


class EngineChild:
    """The engine as `watch` sees it (EngineProcess owns the process; this only reads its status)."""

    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        self.engine, self.name, self.log_path = engine, "inference", engine.log_path

    @property
    def process(self):  # type: ignore[no-untyped-def]
        return self.engine._process

    def stop(self) -> None:
        self.engine.stop()
