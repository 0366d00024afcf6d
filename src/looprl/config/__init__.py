"""Every configuration of looprl: pydantic models read from TOML and dotted overrides, no torch.

    loading.py       `load_config(Model, argv)`: `@ FILE.toml` merged left to right, `--a.b VALUE` overrides
    run.py           `RLConfig`: a whole `looprl rl` run (`[model]`, `[env]`, `[inference]`, `[log]`, ...)
    orchestrator.py  `[orchestrator]` (with `[orchestrator.sampling]`) and `[env]`
    env_runtime.py   `EnvRuntimeConfig`: how env servers run env code (what rl, eval and validate pass them)
    trainer.py       `[trainer]`: loss, optimizer, LoRA, checkpoints
    trackers.py      `[log.trackers]`: W&B, MLflow, Trackio, TensorBoard
    deployment.py    `[deployment]` (GPU placement) and `[slurm]`
    base.py          `Strict`, the base model that rejects unknown keys

The launcher validates the whole config before any process starts, so these modules import no
process package (orchestrator, trainer, inference, ...): each process imports its config from here.
"""

from looprl.config.deployment import DeploymentConfig, SlurmConfig
from looprl.config.env_runtime import EnvRuntimeConfig, LogLimits
from looprl.config.loading import load_config, merge_arguments, validate
from looprl.config.orchestrator import (
    CollapseRecovery,
    DynamicSampling,
    EnvConfig,
    OrchestratorConfig,
    PeriodicEvalConfig,
    SamplingParams,
)
from looprl.config.run import (
    InferenceConfig,
    LogConfig,
    ModelConfig,
    RLConfig,
    engine_dtype,
    read_run_config,
)
from looprl.config.trackers import (
    TRACKER_NAMES,
    MlflowTracker,
    TensorboardTracker,
    TrackersConfig,
    TrackioTracker,
    WandbTracker,
)
from looprl.config.trainer import (
    CheckpointConfig,
    CispoLoss,
    ClippedLoss,
    GspoLoss,
    LoraConfig,
    LossConfig,
    MaskedLoss,
    MisCorrection,
    OptimConfig,
    TisCorrection,
    TrainerConfig,
    TruncatedLoss,
)

__all__ = [
    "TRACKER_NAMES",
    "CheckpointConfig",
    "CispoLoss",
    "ClippedLoss",
    "CollapseRecovery",
    "DeploymentConfig",
    "DynamicSampling",
    "EnvConfig",
    "EnvRuntimeConfig",
    "GspoLoss",
    "InferenceConfig",
    "LogConfig",
    "LogLimits",
    "LoraConfig",
    "LossConfig",
    "MaskedLoss",
    "MisCorrection",
    "MlflowTracker",
    "ModelConfig",
    "OptimConfig",
    "OrchestratorConfig",
    "PeriodicEvalConfig",
    "RLConfig",
    "SamplingParams",
    "SlurmConfig",
    "TensorboardTracker",
    "TisCorrection",
    "TrackersConfig",
    "TrackioTracker",
    "TrainerConfig",
    "TruncatedLoss",
    "WandbTracker",
    "engine_dtype",
    "load_config",
    "merge_arguments",
    "read_run_config",
    "validate",
]
