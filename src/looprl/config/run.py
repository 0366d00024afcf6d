"""The configuration of a whole `looprl rl` run: the shared keys plus one table per process.

    output_dir = "runs/demo"
    max_steps = 40
    [model]            name = "smollm2-135m-instruct"
    [env]              source = "examples/demo/env.py:AdditionEnv"
    [orchestrator]     batch_size = 64, group_size = 8, [orchestrator.sampling] ...
    [trainer]          [trainer.optim] lr = ..., [trainer.loss] ...
    [log]              level = "INFO", [log.trackers.wandb] ... (optional)
    [deployment]       inference_gpus = [0], trainer_gpus = [1, 2, 3]   (optional)
    [slurm]            train_nodes = 2, inference_nodes = 1             (optional: submit to SLURM)

The launcher validates it, writes the resolved file to `{output_dir}/config.toml`, and every child
process reads that file back, so all of them run the same configuration. Pydantic only, no torch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from looprl.config.base import Strict, Url
from looprl.config.deployment import DeploymentConfig, SlurmConfig
from looprl.config.env_runtime import EnvRuntimeConfig, EnvSource, LogLevel, LogLimits
from looprl.config.loading import load_config
from looprl.config.orchestrator import EnvConfig, OrchestratorConfig
from looprl.config.trackers import TrackersConfig
from looprl.config.trainer import TrainerConfig
from looprl.model_loading import DEFAULT_MODEL
from looprl.paths import config_path


class ModelConfig(Strict):
    """`[model]`: the policy that the engine serves and the trainer trains."""

    name: str = DEFAULT_MODEL
    """The policy: the bundled alias, a local HF-format directory or a Hub id. Engine and trainer load it."""


EngineDtype = Literal["auto", "float32", "bfloat16", "float16"]


def engine_dtype(dtype: str, gpu: bool) -> str:
    """`inference.dtype` resolved: `auto` is bfloat16 on a GPU (vLLM's LoRA kernels and FlashAttention take
    nothing wider, and it halves weights and KV cache) and float32 on the CPU (the trainer's dtype there)."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if gpu else "float32"


class InferenceConfig(Strict):
    """`[inference]`: the engine that serves the policy's model calls."""

    backend: Literal["embedded", "vllm"] = "embedded"
    """The engine serving the policy: looprl's embedded engine (transformers, the CPU default) or vLLM."""
    dtype: EngineDtype = "auto"
    """The engine's weights dtype (vLLM's and the embedded engine's `--dtype`), which the trainer also writes
    its broadcasts in. `auto`: bfloat16 with GPUs, float32 on the CPU; `looprl rl` writes the resolved
    value into the run's config.toml."""
    urls: list[Url] = Field(default_factory=list)
    """Root URLs (`http://HOST:PORT`) of engines already serving the policy, each the whole model (`looprl
    inference`, or vLLM with looprl's routes), on a filesystem that sees the run directory: `looprl rl` then
    starts none, spreads the rollouts over them and loads every weight update into each. Empty (the default):
    `looprl rl` starts the engine. A `[slurm]` job ignores it: its inference nodes serve."""
    tensor_parallel_size: int = Field(1, ge=1)
    """vLLM: GPUs per model replica (`--tensor-parallel-size`, raise it for a model one GPU cannot hold); the
    engine's GPUs are split into replicas of this size (`--data-parallel-size`), served by one vLLM server.
    Must divide the engine's GPUs (`[deployment].inference_gpus`, or `slurm.gpus_per_node`)."""
    max_batch_size: int = Field(64, ge=1)
    """Most sequences decoded together (vLLM's `--max-num-seqs`)."""
    max_kv_tokens: int | None = Field(None, ge=1)
    """The embedded engine's KV-cache budget, in tokens of one row (rows x the longest row, as its padded cache
    holds them): a request joins the batch only if its prompt plus `max_tokens` fits beside the rows running,
    else it waits; one that cannot fit alone fails with 400 `kv_budget_exceeded`. Default: 70% of the device's
    memory free once the model is loaded (a GPU's within `--gpu-memory-fraction`). vLLM sizes its own cache
    (`--gpu-memory-utilization` or `--kv-cache-memory-bytes` in `vllm_args`)."""
    vllm_python: str | None = None
    """The interpreter that runs vLLM (its own virtual environment); default: this one if it imports
    vllm, else `.venv-vllm/bin/python` (what `make vllm` builds)."""
    vllm_args: list[str] = Field(default_factory=list)
    """Extra `vllm serve` flags, last on its command line, e.g. `["--gpu-memory-utilization", "0.5"]`; not
    `--api-key`, which would be in config.toml and in `ps` (looprl gives vLLM the run's secret itself)."""
    tool_call_parser: str | None = "hermes"
    """vLLM's tool-call parser for the model's chat template (None: no tool calls parsed)."""

    @model_validator(mode="after")
    def _kv_budget_is_the_embedded_engines(self) -> InferenceConfig:
        if self.max_kv_tokens is not None and self.backend == "vllm":
            raise ValueError("inference.max_kv_tokens sizes the embedded engine's KV cache; vLLM sizes its own: set "
                             "--gpu-memory-utilization or --kv-cache-memory-bytes in inference.vllm_args")
        return self

    @field_validator("vllm_args")
    @classmethod
    def _no_api_key_on_the_command_line(cls, args: list[str]) -> list[str]:
        if any(a == "--api-key" or a.startswith("--api-key=") for a in args):
            raise ValueError("--api-key does not belong in vllm_args: config.toml and the process list (ps) "
                             "would show it; looprl gives vLLM the run's secret through its environment")
        return args


class LogConfig(Strict):
    """`[log]`: the process logs under `{output_dir}/logs/`."""

    level: LogLevel = "INFO"
    """Level of the process logs (and of env log records captured per rollout)."""
    json_logging: bool = False
    """Write the process logs as JSON lines instead of text."""
    env_limits: LogLimits = Field(default_factory=LogLimits)
    """Per-rollout bounds on captured env log records (`[log.env_limits] max_records = ...`)."""
    trackers: TrackersConfig = Field(default_factory=TrackersConfig)
    """Experiment trackers (W&B, MLflow, Trackio, TensorBoard) that also get each step's metrics, the
    run config, eval results and links to the run directory and inspector page; none by default."""


class RLConfig(Strict):
    """A whole `looprl rl` run: the keys at the top of the file."""

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
    """The inference engine (embedded or vLLM)."""
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

    @model_validator(mode="after")
    def _vllm_replicas_fill_a_node(self) -> RLConfig:
        """Said when the job is written, not minutes later on every inference node."""
        tp, slurm = self.inference.tensor_parallel_size, self.slurm
        if slurm is not None and self.inference.backend == "vllm" and slurm.gpus_per_node % tp:
            raise ValueError(f"inference.tensor_parallel_size = {tp} must divide slurm.gpus_per_node = "
                             f"{slurm.gpus_per_node} (each inference node runs vLLM replicas of {tp} GPUs)")
        return self

    @model_validator(mode="after")
    def _shared_memory_needs_the_embedded_engine_here(self) -> RLConfig:
        if self.trainer.weight_handoff == "shared_memory" and (self.inference.backend == "vllm" or self.slurm
                                                               or self.inference.urls):
            raise ValueError("trainer.weight_handoff = \"shared_memory\" needs the embedded engine that looprl rl "
                             "starts on the trainer's host: vLLM, [slurm] jobs and engines at inference.urls load "
                             "weights from files (\"file\" or \"auto\")")
        return self

    def for_hardware(self, gpus: int) -> RLConfig:
        """This config with what it leaves to the hardware decided, for a machine with `gpus` GPUs (a
        SLURM job: its nodes'); `looprl rl` writes the result into the run's `config.toml`.

        `orchestrator.max_off_policy_steps`: 0 without a GPU, where the engine and the trainer compute
        on the same cores, so overlapping them gains nothing and costs each half the cores; 1 with GPUs.
        `inference.dtype = "auto"`: bfloat16 with GPUs, float32 without (`engine_dtype`).
        `trainer.weight_handoff = "auto"`: `shared_memory` when `looprl rl` starts the embedded engine on
        this (Linux) host, `file` otherwise (vLLM, `inference.urls`, a `[slurm]` job).
        """
        orchestrator, inference, trainer = self.orchestrator, self.inference, self.trainer
        if orchestrator.max_off_policy_steps is None:
            orchestrator = orchestrator.model_copy(update={"max_off_policy_steps": 0 if gpus == 0 else 1})
        inference = inference.model_copy(update={"dtype": engine_dtype(inference.dtype, gpus > 0)})
        if trainer.weight_handoff == "auto":
            here = inference.backend == "embedded" and not inference.urls and self.slurm is None
            trainer = trainer.model_copy(update={"weight_handoff": "shared_memory" if here and sys.platform == "linux"
                                                 else "file"})
        return self.model_copy(update={"orchestrator": orchestrator, "inference": inference, "trainer": trainer})

    def env_runtime(self) -> EnvRuntimeConfig:
        """How the run's env servers run env code: `[env]` with `[log]`'s level, format and env limits."""
        return EnvRuntimeConfig(**self.env.model_dump(include=set(EnvSource.model_fields)), level=self.log.level,
                                json_logging=self.log.json_logging, log_limits=self.log.env_limits)

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
