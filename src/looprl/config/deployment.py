"""Where the processes of a run go: `[deployment]` (GPUs of one machine) and `[slurm]` (a cluster).

    [deployment]                      [slurm]
    inference_gpus = [0]              train_nodes = 2
    trainer_gpus = [1, 2, 3]          inference_nodes = 1
                                      gpus_per_node = 8

Without a GPU both lists are ignored and everything runs on the CPU. With one GPU the default puts
the engine and the trainer on it together (the engine takes `inference_memory_fraction`). Pydantic
only, no torch: the launcher decides the placement from these and `torch.cuda.device_count()`.
"""

from __future__ import annotations

from pydantic import Field

from looprl.config.base import Strict

MEMORY_FRACTION_ENV = "LOOPRL_GPU_MEMORY_FRACTION"
"""How the launcher hands `inference_memory_fraction` to an engine that shares its GPU (read by the
embedded engine's `--gpu-memory-fraction` and mapped to vLLM's `--gpu-memory-utilization`)."""


class DeploymentConfig(Strict):
    """`[deployment]`: the GPUs of this machine each process sees (its `CUDA_VISIBLE_DEVICES`)."""

    inference_gpus: list[int] | None = None
    """GPUs of the inference engine (default: GPU 0)."""
    trainer_gpus: list[int] | None = None
    """GPUs of the trainer, one rank each (default: every GPU but the engine's; GPU 0 when it is the only one)."""
    inference_memory_fraction: float = Field(0.4, gt=0, lt=1)
    """Share of a GPU's memory the engine may use when it shares that GPU with the trainer (the embedded
    engine's `--gpu-memory-fraction`, vLLM's `--gpu-memory-utilization` unless `inference.vllm_args` sets it)."""


class SlurmConfig(Strict):
    """The `[slurm]` table: with it, `looprl rl` submits the run as one SLURM job."""

    job_name: str = "looprl"
    """The job's name in `squeue`."""
    train_nodes: int = Field(1, ge=1)
    """Nodes running the trainer (torchrun, one agent per node)."""
    inference_nodes: int = Field(1, ge=1)
    """Nodes running an inference engine each."""
    gpus_per_node: int = Field(8, ge=0)
    """GPUs requested per node; also torchrun's `--nproc-per-node` (at least 1 process)."""
    partition: str | None = None
    """`--partition`."""
    account: str | None = None
    """`--account`."""
    qos: str | None = None
    """`--qos`."""
    time: str = "24:00:00"
    """`--time`, the job's wall-clock limit."""
    cpus_per_task: int | None = Field(None, ge=1)
    """`--cpus-per-task` (one task per node)."""
    mem: str | None = None
    """`--mem` per node, e.g. "0" for all of it."""
    exclusive: bool = True
    """`--exclusive`: the nodes are not shared with other jobs."""
    rdzv_port: int = Field(29500, ge=1, le=65535)
    """The trainer's rendezvous port on the first node."""
    inference_port: int = Field(8000, ge=1, le=65535)
    """The port the inference engine serves on, on each inference node."""
    setup: list[str] = Field(default_factory=list)
    """Shell lines run first on every node (module loads, `source .venv/bin/activate`, exports)."""
    sbatch_args: list[str] = Field(default_factory=list)
    """Extra `#SBATCH` options, e.g. `["--constraint=h100", "--mail-type=END"]`."""
