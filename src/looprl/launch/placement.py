"""Which processes of a local run get which GPUs, and how the trainer starts (one process or torchrun).

    no GPU              engine and trainer on the CPU; `trainer.world_size` CPU ranks (gloo)
    one GPU             engine and trainer share GPU 0; the engine takes `inference_memory_fraction`
                        (`LOOPRL_GPU_MEMORY_FRACTION` in both environments), the trainer the rest
    several GPUs        `[deployment]` lists (default: engine on GPU 0, one trainer rank per other GPU)

Each process sees only its GPUs (`CUDA_VISIBLE_DEVICES`), so inside it they count from 0. The
`[deployment]` indices count the GPUs `looprl rl` itself sees: under a scheduler's allocation
(`CUDA_VISIBLE_DEVICES=4,5,6,7`) index 0 is GPU 4, so each child's list is mapped through the
parent's (`visible_gpus`). With more
than one trainer rank the trainer runs under torchrun (`--standalone`): rank 0's output goes to
`logs/trainer.log`, every rank's to `logs/trainer/torchrun/` (`--log-dir`, the seed-002 layout).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from looprl.config import RLConfig
from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.errors import UserError
from looprl.paths import torchrun_log_dir


@dataclass
class Placement:
    trainer_ranks: int = 1
    engine_env: dict[str, str] = field(default_factory=dict)
    trainer_env: dict[str, str] = field(default_factory=dict)


def visible_gpus(gpu_count: int, parent: str | None = None) -> list[str]:
    """The device names behind indices `0 .. gpu_count-1`: the parent's `CUDA_VISIBLE_DEVICES` entries
    (numbers, UUIDs or MIG ids; default: this process's variable), or the indices themselves when unset."""
    parent = os.environ.get("CUDA_VISIBLE_DEVICES") if parent is None else parent
    names = [name.strip() for name in (parent or "").split(",") if name.strip()]
    return names[:gpu_count] if len(names) >= gpu_count else [str(i) for i in range(gpu_count)]


def place(cfg: RLConfig, gpu_count: int, visible: Sequence[str] | None = None) -> Placement:
    """The placement of `cfg`'s processes on a machine with `gpu_count` GPUs, named `visible`
    (default: `visible_gpus(gpu_count)`) in the children's `CUDA_VISIBLE_DEVICES`."""
    if gpu_count == 0 or cfg.trainer.device == "cpu":
        return Placement(trainer_ranks=cfg.trainer.world_size)
    dep = cfg.deployment
    inference = dep.inference_gpus if dep.inference_gpus is not None else [0]
    trainer = dep.trainer_gpus if dep.trainer_gpus is not None else [g for g in range(gpu_count) if g not in inference]
    trainer = trainer or inference[:1]
    unknown = sorted({*inference, *trainer} - set(range(gpu_count)))
    if unknown:
        raise UserError(f"[deployment] names GPU(s) {unknown}, but this machine has {gpu_count}")
    names = list(visible) if visible is not None else visible_gpus(gpu_count)
    engine_env = {"CUDA_VISIBLE_DEVICES": ",".join(names[g] for g in inference)}
    trainer_env = {"CUDA_VISIBLE_DEVICES": ",".join(names[g] for g in trainer)}
    if set(inference) & set(trainer):
        engine_env[MEMORY_FRACTION_ENV] = trainer_env[MEMORY_FRACTION_ENV] = str(dep.inference_memory_fraction)
    return Placement(len(trainer), engine_env, trainer_env)


def trainer_command(python: str, run_dir: Path, ranks: int, args: list[str]) -> list[str]:
    """`python -m looprl.trainer RUN_DIR ARGS`, under torchrun when `ranks` > 1."""
    if ranks == 1:
        return [python, "-m", "looprl.trainer", str(run_dir), *args]
    return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
            f"--log-dir={torchrun_log_dir(run_dir)}", "--redirects=3", "--tee=3", "--local-ranks-filter=0",
            "-m", "looprl.trainer", str(run_dir), *args]
