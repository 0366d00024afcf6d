"""The configuration of a whole `looprl rl` run: the shared keys plus one table per process.

    output_dir = "runs/demo"
    max_steps = 40
    [model]            name = "smollm2-135m-instruct"
    [env]              source = "examples/demo/env.py:AdditionEnv"
    [orchestrator]     batch_size = 32, group_size = 8, [orchestrator.sampling] ...
    [trainer]          [trainer.optim] lr = ..., [trainer.loss] ...
    [log]              level = "INFO", [log.trackers.wandb] ... (optional)
    [deployment]       inference_gpus = [0], trainer_gpus = [1, 2, 3]   (optional)
    [slurm]            train_nodes = 2, inference_nodes = 1             (optional: submit to SLURM)

The launcher validates it, writes the resolved file to `{output_dir}/config.toml`, and every child
process reads that file back, so all of them run the same configuration. Pydantic only, no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from looprl.config.base import Strict
from looprl.config.deployment import DeploymentConfig, SlurmConfig
from looprl.config.loading import load_config
from looprl.config.orchestrator import EnvConfig, OrchestratorConfig
from looprl.config.trackers import TrackersConfig
from looprl.config.trainer import TrainerConfig
from looprl.models import DEFAULT_MODEL
from looprl.paths import config_path


class ModelConfig(Strict):
    name: str = DEFAULT_MODEL
    """The policy: the bundled alias, a local HF-format directory or a Hub id. Engine and trainer load it."""


class InferenceConfig(Strict):
    backend: Literal["embedded", "vllm"] = "embedded"
    """The engine serving the policy: looprl's embedded engine (transformers, the CPU default) or vLLM."""
    max_batch_size: int = Field(64, ge=1)
    """Most sequences decoded together (vLLM's `--max-num-seqs`)."""
    vllm_python: str | None = None
    """The interpreter that runs vLLM (its own virtual environment); default: this one if it imports
    vllm, else `.venv-vllm/bin/python` (what `make vllm` builds)."""
    vllm_args: list[str] = Field(default_factory=list)
    """Extra `vllm serve` flags, last on its command line, e.g. `["--gpu-memory-utilization", "0.5"]`."""
    tool_call_parser: str | None = "hermes"
    """vLLM's tool-call parser for the model's chat template (None: no tool calls parsed)."""


class LogConfig(Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Level of the process logs (and of env log records captured per rollout)."""
    json_logging: bool = False
    """Write the process logs as JSON lines instead of text."""
    trackers: TrackersConfig = Field(default_factory=TrackersConfig)
    """Experiment trackers (W&B, MLflow, Trackio, TensorBoard) that also get each step's metrics, the
    run config, eval results and links to the run directory and inspector page; none by default."""


class RLConfig(Strict):
    output_dir: Path = Path("runs/rl")
    """The run directory: config, run store, checkpoints, broadcasts, logs."""
    max_steps: int = Field(20, ge=1)
    """Training steps (optimizer updates) of the run."""
    seed: int = 0
    """Seeds the example order, sampling (unless `orchestrator.sampling.seed` is set) and the trainer."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model trained and served."""
    env: EnvConfig
    """The environment trained on (and evaluated on, with its eval split)."""
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    """The embedded inference engine."""
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    """Rollouts, rewards, advantages, batches."""
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """Loss, optimizer, checkpoints."""
    log: LogConfig = Field(default_factory=LogConfig)
    """Process logging."""
    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    """Which GPUs of this machine serve inference and which train."""
    slurm: SlurmConfig | None = None
    """With a `[slurm]` table, `looprl rl` submits the run as one SLURM job (`--dry-run` writes the script)."""

    def for_hardware(self, gpus: int) -> RLConfig:
        """This config with what it leaves to the hardware decided, for a machine with `gpus` GPUs (a
        SLURM job: its nodes'); `looprl rl` writes the result into the run's `config.toml`.

        `orchestrator.max_off_policy_steps`: 0 without a GPU, where the engine and the trainer compute
        on the same cores, so overlapping them gains nothing and costs each half the cores; 1 with GPUs.
        """
        if self.orchestrator.max_off_policy_steps is not None:
            return self
        orchestrator = self.orchestrator.model_copy(update={"max_off_policy_steps": 0 if gpus == 0 else 1})
        return self.model_copy(update={"orchestrator": orchestrator})

    def to_toml_dict(self) -> dict[str, Any]:
        """The resolved config as TOML-writable data (None values left out: TOML has no null)."""
        return _drop_none(self.model_dump(mode="json"))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def read_run_config(run_dir: Path) -> RLConfig:
    """The config the launcher wrote into a run directory (what every child process runs)."""
    return load_config(RLConfig, ["@", str(config_path(run_dir))])
