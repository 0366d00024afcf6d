"""The `verifiers.v1` env config a looprl run builds from `vf:ENV_ID`, its env args and the split.

`--env-args` (or `[env] args`) is the taskset's config: its own keys (`num_tasks`, `task`, ...) and
`split`. One key is looprl's: `agent`, the one agent seat (`harness`, `runtime`, `max_turns`,
`timeout`, ...), as `--env.agent.*` is in `vf-eval`. verifiers' defaults are remote (a Prime
sandbox runtime, the `bash` harness); looprl's are local: the `subprocess` runtime, and the `null`
harness (a plain chat loop with the env's MCP tools) unless the env package exports a harness of its
own. A key the user gives under `agent` replaces looprl's default for it.

The run's split reaches a taskset that has a `split` field unless the env args pin one: looprl's
`train` is `"train"`, its `eval` the first of `eval`, `test`, `validation` that the field accepts
(a plain `str` field: `test`, the usual name of a dataset's held-out split).
"""

from __future__ import annotations

import typing
from typing import Any

from looprl.envs.types import DatasetSplit
from looprl.errors import UserError

LOCAL_RUNTIME = {"type": "subprocess"}
LOCAL_HARNESS = {"id": "null"}
EVAL_SPLIT_NAMES = ("eval", "test", "validation")


def env_config(env_id: str, env_args: dict[str, Any], split: DatasetSplit) -> Any:
    """The resolved `vf.EnvConfig` for `env_id` with `env_args` on `split`; a `UserError` naming the bad key."""
    import verifiers.v1 as vf
    from pydantic import ValidationError

    taskset = {k: v for k, v in env_args.items() if k != "agent"}
    agent = env_args.get("agent") or {}
    if not isinstance(agent, dict):
        raise UserError(f"env args 'agent' must be an object (harness, runtime, max_turns, ...), got {agent!r}")
    try:
        config_cls = vf.taskset_config_type(env_id)
        own_harness = vf.default_harness_id(env_id) != "bash"
    except (ModuleNotFoundError, TypeError, AttributeError, ValueError) as e:
        raise UserError(f"vf:{env_id}: {e}") from e
    if "split" not in taskset and "split" in config_cls.model_fields:
        taskset["split"] = split_name(config_cls.model_fields["split"].annotation, split)
    defaults: dict[str, Any] = {"runtime": LOCAL_RUNTIME} if own_harness else {"runtime": LOCAL_RUNTIME,
                                                                                "harness": LOCAL_HARNESS}
    try:
        return vf.resolve_env_config({"taskset": {**taskset, "id": env_id}, "agent": {**defaults, **agent}})
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise UserError(f"vf:{env_id}: bad env args {env_args}: {problems}") from None


def split_name(annotation: Any, split: DatasetSplit) -> str:
    """The value of a taskset's `split` field for looprl's `split` (module docstring)."""
    if split == "train":
        return "train"
    allowed = [a for a in typing.get_args(annotation) if isinstance(a, str)] if typing.get_origin(
        annotation) is typing.Literal else []
    return next((name for name in EVAL_SPLIT_NAMES if name in allowed), "test")
