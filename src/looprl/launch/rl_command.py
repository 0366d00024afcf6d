"""`looprl rl @ CONFIG.toml [--key.sub VALUE ...] [--dry-run] [--resume]`: a whole training run.

Validates the config, writes the resolved `config.toml` into `output_dir` (`--dry-run` stops there),
checks the output directory, the env import and the train split's first rows (each mistake one line
and exit 2, before anything slow), starts the inference engine (none with `inference.urls`: the
orchestrator then uses those engines), then the orchestrator and the trainer as child processes,
each with its output in `logs/<process>.log` (with `trainer.weight_handoff = "shared_memory"` the
trainer gets the run's region in `/dev/shm`, `launch.weight_region`, removed when the run ends),
and supervises them: when one fails the others are stopped, the command exits 1 and prints the tail
of the failing log; Ctrl-C stops them all.
Before any of them starts it makes the run secret (`{output_dir}/run_secret`, 0600;
`looprl.handoff.engine_access`) and hands it to the engine and the orchestrator in their environment,
never on a command line: the engine binds 127.0.0.1, requires the secret on every route but `/health`
and loads weights only from the run's `broadcasts/` and its shared-memory region.
Meanwhile it prints the engine coming up, a line per step, the orchestrator's warnings and a
closing summary (`launch.progress`, which only reads the run store and the orchestrator's log).

`--resume` continues a run from its latest checkpoint k: files of later steps (hand-off files and
broadcasts, and every shared-memory broadcast) are removed, the orchestrator deletes store rows after
step k, both processes go on at k+1 (k = 0, a fresh start in the same run, when the run died before
its first checkpoint).

GPUs and ranks come from the config (`launch.placement`); with a `[slurm]` table the run is one
SLURM job instead (`launch.slurm`): `--dry-run` writes `{output_dir}/rl.sbatch`, otherwise it is
submitted with `sbatch`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from looprl.config import RLConfig
    from looprl.inference.process import EngineProcess

FLAGS = ("--dry-run", "--resume")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="write the resolved config.toml and exit")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in output_dir from its latest checkpoint")
    parser.add_argument("--env-args", metavar="JSON",
                        help="the env constructor's keyword arguments, a JSON object (sets env.args, as in eval)")
    parser.add_argument("config", nargs=argparse.REMAINDER, metavar="@ CONFIG.toml [--key.sub VALUE ...]",
                        help="config files (deep-merged left to right), then dotted overrides")


def run(args: argparse.Namespace) -> int:
    import tomli_w

    from looprl.config import RLConfig, load_config
    from looprl.errors import UserError
    from looprl.paths import config_path, db_path
    from looprl.session.preflight import check_env

    given = [a for a in args.config if a not in FLAGS]
    argv = env_args_override(given + (["--env-args", args.env_args] if args.env_args is not None else []))
    dry_run = args.dry_run or "--dry-run" in args.config
    resume = args.resume or "--resume" in args.config
    cfg = load_config(RLConfig, argv)
    cfg = cfg.for_hardware(cfg.slurm.gpus_per_node if cfg.slurm is not None else local_gpu_count())
    run_dir = cfg.output_dir
    if cfg.slurm is not None:
        return submit_to_slurm(cfg, resumable_step(run_dir) if resume else 0, dry_run)
    if dry_run:
        run_dir.mkdir(parents=True, exist_ok=True)
        config_path(run_dir).write_text(tomli_w.dumps(cfg.to_toml_dict()))
        print(f"wrote {config_path(run_dir)}")
        return 0
    resume_step = 0
    if resume and not db_path(run_dir).exists():
        raise UserError(f"{run_dir} holds no run to resume (no {db_path(run_dir).name})")
    if resume:
        resume_step = resumable_step(run_dir)
    elif db_path(run_dir).exists():
        raise UserError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another output_dir")
    declared = check_env(cfg.env.source, cfg.env.args, cfg.env.train_split, cfg.env.base_dir,
                         max_examples=8).reward_weights  # before the engine
    cfg.orchestrator.reward_weights = {**declared, **cfg.orchestrator.reward_weights}  # the config's own win
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path(run_dir).write_text(tomli_w.dumps(cfg.to_toml_dict()))
    return launch(cfg, run_dir, resume_step)


def env_args_override(argv: list[str]) -> list[str]:
    """`--env-args JSON` (as `eval` and `validate` take it) as the `--env.args` override, checked as they check it."""
    import json

    from looprl.envserver.loading import parse_env_args
    from looprl.errors import UserError

    out: list[str] = []
    items = list(argv)
    while items:
        arg = items.pop(0)
        if arg == "--env-args" or arg.startswith("--env-args="):
            text = arg.partition("=")[2] if "=" in arg else (items.pop(0) if items else "")
            if not text:
                raise UserError("--env-args needs a JSON object")
            out += ["--env.args", json.dumps(parse_env_args(text))]
        else:
            out.append(arg)
    return out


def resumable_step(run_dir: Path) -> int:
    """The latest checkpoint step (0 if none yet), with every file of later steps removed, and every
    broadcast through shared memory (its region ended with the run that made it; the trainer broadcasts
    its restored weights again)."""
    from looprl.handoff import latest_checkpoint, step_dirs
    from looprl.handoff.shared_weights import read_message
    from looprl.paths import broadcasts_dir, steps_dir

    step = latest_checkpoint(run_dir) or 0
    for root in (steps_dir(run_dir), broadcasts_dir(run_dir)):
        for n, stale in step_dirs(root).items():
            if n > step or read_message(stale) is not None:
                shutil.rmtree(stale, ignore_errors=True)
    return step


def launch(cfg: RLConfig, run_dir: Path, resume_step: int) -> int:
    from looprl.handoff.engine_access import SECRET_ENV, create_run_secret
    from looprl.inference.backends import run_engine
    from looprl.launch.placement import place, trainer_command
    from looprl.launch.progress import RunProgress, duration
    from looprl.launch.supervisor import Child, python_module, stop_all, tail, watch
    from looprl.launch.weight_region import weight_region
    from looprl.paths import broadcasts_dir, log_path

    signal.signal(signal.SIGTERM, _exit_on_signal)  # `kill` cleans up like Ctrl-C does
    share_cpu_threads(cfg.orchestrator.off_policy_steps)
    placement = place(cfg, local_gpu_count())
    os.environ.update(placement.engine_env)  # the engine (and the orchestrator, which needs no GPU)
    resume = ["--resume-step", str(resume_step)]
    progress = RunProgress(run_dir, cfg.max_steps, first_step=resume_step + 1)
    progress.say(f"looprl rl: run directory {run_dir} (logs in {log_path(run_dir, '*')})" +
                 (f", resuming after step {resume_step}" if resume_step else ""))
    secret = create_run_secret(run_dir)  # to the engine and the orchestrator, in their environment only
    os.environ.pop(SECRET_ENV, None)  # a secret the user exported reaches no other child (the trainer)
    children: list[Child] = []
    completed = False
    with contextlib.ExitStack() as stack:
        weights_dirs = [broadcasts_dir(run_dir)]
        if cfg.trainer.weight_handoff == "shared_memory":
            weights_dirs.append(stack.enter_context(weight_region()))
            trainer_args = [*resume, "--weights-region", str(weights_dirs[-1])]
        else:
            trainer_args = resume
        engines = [] if cfg.inference.urls else [
            run_engine(cfg, log_path(run_dir, "inference"), secret=secret, weights_dirs=weights_dirs)]
        if engines:
            progress.say(f"looprl rl: starting the inference engine ({cfg.model.name}) ...")
            engine_start = time.monotonic()
            urls = [stack.enter_context(engines[0]).url]
            ready = f"engine ready in {duration(time.monotonic() - engine_start)}"
        else:
            urls = check_engines(cfg.inference.urls, secret)
            ready = f"the engines at {', '.join(urls)} are ready"
        progress.say(f"looprl rl: {ready}; starting the orchestrator and the trainer")
        progress.follow()
        try:
            orchestrator = Child("orchestrator", log_path(run_dir, "orchestrator")).start(python_module(
                "looprl.orchestrator", str(run_dir), "--engine-url", *urls, "--model-name", cfg.model.name, *resume),
                {SECRET_ENV: secret})
            children.append(orchestrator)
            trainer = Child("trainer", log_path(run_dir, "trainer")).start(
                trainer_command(sys.executable, run_dir, placement.trainer_ranks, trainer_args), placement.trainer_env)
            children.append(trainer)
            failed = watch([*map(EngineChild, engines), *children], until_done=children, tick=progress.poll)
            completed = failed is None
            status = failed.process.poll() if failed is not None and failed.process else None
        finally:
            stop_all(children)
            progress.close(completed)
    if failed is not None:
        print(f"looprl rl: {failed.name} exited with status {status}; last lines of {failed.log_path}:\n"
              f"{tail(failed.log_path)}", file=sys.stderr)
        return 1
    progress.say(f"Look at the run with:\n  looprl metrics {run_dir}\n  looprl inspect {run_dir}")
    return 0


def check_engines(urls: list[str], secret: str) -> list[str]:
    """`inference.urls` without a trailing slash, once each answers `/health` and takes the run `secret`
    (else a one-line error)."""
    import httpx

    from looprl.errors import UserError

    roots = [url.rstrip("/") for url in urls]
    for root in roots:
        try:
            healthy = httpx.get(f"{root}/health", timeout=10).status_code == 200
            refused = healthy and httpx.get(f"{root}/v1/models", timeout=10,
                                            headers={"Authorization": f"Bearer {secret}"}).status_code == 401
        except httpx.HTTPError:
            healthy = False
        if not healthy:
            raise UserError(f"inference.urls: no engine answers {root}/health")
        if refused:
            raise UserError(f"inference.urls: the engine at {root} refuses this run's secret: start it and `looprl rl` "
                            "with the same LOOPRL_RUN_SECRET in their environment")
    return roots


def submit_to_slurm(cfg: RLConfig, resume_step: int, dry_run: bool) -> int:
    """Write `config.toml` and `rl.sbatch` into `output_dir`; submit it unless `dry_run`."""
    import tomli_w

    from looprl.handoff.engine_access import create_run_secret
    from looprl.launch.slurm import (
        engines_per_node,
        render_sbatch,
        slurm_commands,
        submit_sbatch,
        write_sbatch,
    )
    from looprl.paths import config_path, logs_dir

    assert cfg.slurm is not None
    run_dir = cfg.output_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path(run_dir).write_text(tomli_w.dumps(cfg.to_toml_dict()))
    create_run_secret(run_dir)  # the job's processes read it from the shared filesystem
    commands = slurm_commands(sys.executable, run_dir, cfg, resume_step)
    path = write_sbatch(render_sbatch(cfg.slurm, run_dir, **commands, engines_per_node=engines_per_node(cfg)), run_dir)
    if dry_run:
        print(f"wrote {path}")
        return 0
    job = submit_sbatch(path)
    print(f"looprl rl: submitted SLURM job {job} ({path}); logs in {logs_dir(run_dir)}: trainer/node_N.log, "
          f"inference/node_N.log, orchestrator.log, trainer/torchrun/ (every rank)")
    return 0


def local_gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def share_cpu_threads(max_off_policy_steps: int) -> None:
    """Without a GPU the engine and the trainer compute on the same cores. With off-policy overlap
    (`max_off_policy_steps` >= 1) they run at the same time, and torch's OpenMP threads spin while they
    wait, so two processes each using every core slow each other down several times over: each gets
    half of the cores. At 0 they take turns (the engine waits for the new weights while the trainer
    trains, the trainer waits for the batch), so each gets every core: on 2 cores that made the demo
    reach 95 % of its maximum reward sooner than overlapping did (docs/benchmarks.md).
    Idle threads sleep either way, and a user's OMP_NUM_THREADS wins. The children inherit this."""
    if local_gpu_count():
        return
    os.environ["OMP_NUM_THREADS"] = cpu_threads_per_process(max_off_policy_steps)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def cpu_threads_per_process(max_off_policy_steps: int) -> str:
    """The OMP_NUM_THREADS each CPU process gets: the user's if set; otherwise every core when the engine
    and the trainer take turns (no lag), half of them when they overlap."""
    cores = os.cpu_count() or 2
    return os.environ.get("OMP_NUM_THREADS") or str(cores if max_off_policy_steps == 0 else max(1, cores // 2))


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class EngineChild:
    """The engine as `watch` sees it (EngineProcess owns the process; this only reads its status)."""

    def __init__(self, engine: EngineProcess) -> None:
        self.engine, self.name, self.log_path = engine, "inference", engine.log_path

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.engine.process
