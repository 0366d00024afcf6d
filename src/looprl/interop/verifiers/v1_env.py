"""An installed `verifiers.v1` env package (verifiers >= 0.4), `vf:ENV_ID`, as a looprl `Environment`.

`env_class("add-tool-v1")` makes a looprl environment class whose instances build verifiers' env from
`vf.resolve_env_config` (`v1_config`: the env args onto the taskset's config, local defaults for the
agent) and `vf.load_environment`, one per split. The taskset's tasks are looprl's examples (the
prompt as `prompt_messages`, every other `TaskData` field kept, so the task is rebuilt exactly in
whichever process runs it). Each rollout is verifiers' own `env.run_slot` with the rollout's gateway
URL as the model endpoint: the harness process calls the model through verifiers' interception
server, which relays every call (streamed) to looprl's gateway, so each one is recorded with its token
ids. Scoring runs inside `run_slot`, on this process's event loop, so the env's `logging` records
land on their rollout. `v1_results` maps each episode onto looprl's record; `rescore` runs a stored
rollout's scoring again on the trace it kept.

Each harness (and each tool server verifiers packages) is a `uv` script: `uv` syncs its dependencies from
the package index on first use, and later runs reuse the cache. The `verifiers` extra installs `uv`
into looprl's venv; `ensure_uv` puts it on the PATH the harness processes inherit when the venv's
`bin/` is not on it (a venv used without activating it).

The env's serving resources (`env.serving()`: shared tool servers, the interception server) live for
the environment's lifetime, held by a task started in a fresh context: nothing they log is
attributed to the rollout that happened to start them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import shutil
import time
from pathlib import Path
from typing import Any, ClassVar

from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.logging import attribute_to
from looprl.envs.types import SCORED_REASONS, DatasetSplit, Example, GroupRequest, Message, RolloutResult
from looprl.errors import UserError
from looprl.interop.verifiers import v1_config, v1_results

GATEWAY_KEY_VAR = "LOOPRL_VF_GATEWAY_KEY"
"""The API-key variable verifiers' client reads for the gateway: unset, so it sends none (the gateway's session
URLs are loopback-only)."""


def env_class(env_id: str) -> type[Environment]:
    """A looprl environment class for the installed `verifiers.v1` env package `env_id`."""
    return type(env_id.replace("-", "_"), (V1Environment,), {"env_id": env_id})


def ensure_uv() -> None:
    """`uv` on this process's PATH (which harness processes inherit): the uv of looprl's venv when none is."""
    if shutil.which("uv"):
        return
    try:
        from uv import find_uv_bin
    except ImportError:
        raise UserError("verifiers' harnesses run as `uv` scripts, and uv is not installed: "
                        "pip install 'looprl[verifiers]' (or uv itself)") from None
    os.environ["PATH"] = os.pathsep.join([str(Path(find_uv_bin()).parent), os.environ.get("PATH", "")])


def prompt_messages(data: Any) -> list[Message]:
    """The task's opening messages: its system prompt, then its prompt (text, or messages)."""
    from verifiers.v1.dialects.chat import message_to_wire

    system = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    if data.prompt is None:
        return system
    if isinstance(data.prompt, str):
        return [*system, {"role": "user", "content": data.prompt}]
    return [*system, *(message_to_wire(m) for m in data.prompt)]


class _Serving:
    """`env.serving()` held open by a task of its own until `close`."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.get_running_loop().create_task(self._hold(ready), context=contextvars.Context())
        await ready

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with self.env.serving():
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            raise

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task


class V1Environment(Environment):
    env_id: ClassVar[str]

    def __init__(self, **env_args: Any) -> None:
        self.env_args = env_args
        self._envs: dict[DatasetSplit, Any] = {}
        self._serving: dict[DatasetSplit, _Serving] = {}
        self._serving_lock = asyncio.Lock()
        ensure_uv()
        self._env("train")  # a bad env id or env arg fails here, at construction
        self.reward_weights = self._weights()

    def _env(self, split: DatasetSplit) -> Any:
        if split not in self._envs:
            import verifiers.v1 as vf

            config = v1_config.env_config(self.env_id, self.env_args, split)
            if not issubclass(vf.environment_class(config.taskset.id, config.id), vf.SingleAgentEnv):
                raise UserError(f"vf:{self.env_id} is a multi-agent env: looprl runs single-agent verifiers envs")
            self._envs[split] = vf.load_environment(config)
        return self._envs[split]

    def _weights(self) -> dict[str, float]:
        """Each `@vf.reward`'s weight (and each judge's), 0 for each `@vf.metric`: read off the task class."""
        env = self._env("train")
        task_cls = type(env.taskset).task_type()
        probe = task_cls.__new__(task_cls)  # hooks read only the class and its config, never the row
        probe.config = env.taskset.config.task
        weights = {fn.__name__: 0.0 for fn in probe.hooks("metric")}
        weights.update({fn.__name__: float(getattr(fn, "_vf_weight", 1.0)) for fn in probe.hooks("reward")})
        weights.update({judge.reward_name: float(judge.config.weight) for judge in probe.plugged_judges()})
        return weights

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *,
                             max_examples: int | None = None) -> Dataset:
        tasks = await asyncio.to_thread(self._tasks, split, max_examples)
        return Dataset((self._example(task) for task in tasks), source=f"{self.env_id} {split} tasks")

    def _tasks(self, split: DatasetSplit, max_examples: int | None) -> list[Any]:
        taskset = self._env(split).taskset
        if max_examples is not None:
            taskset = taskset.take(max_examples)
        if not taskset.bounded:
            raise UserError(f"vf:{self.env_id}: the taskset is infinite; bound it with max_examples")
        return list(taskset)

    @staticmethod
    def _example(task: Any) -> Example:
        data = task.data.model_dump(mode="json", exclude_defaults=True, exclude={"prompt"})
        return Example(id=str(task.data.id if task.data.id is not None else task.data.idx),
                       payload={"prompt_messages": prompt_messages(task.data), **data})

    def _task(self, env: Any, example: Example) -> Any:
        """The task an example was made from, rebuilt from its payload."""
        task_cls = type(env.taskset).task_type()
        fields = dict(example.example_args)
        messages = [m for m in example.prompt_messages if not (fields.get("system_prompt") and m["role"] == "system"
                                                                and m["content"] == fields["system_prompt"])]
        one_text = len(messages) == 1 and messages[0]["role"] == "user" and isinstance(messages[0]["content"], str)
        fields["prompt"] = messages[0]["content"] if one_text else (messages or None)
        return task_cls(task_cls.data_type().model_validate(fields), env.taskset.config.task)

    async def _serving_env(self, split: DatasetSplit) -> Any:
        async with self._serving_lock:
            if split not in self._serving:
                env = await asyncio.to_thread(self._env, split)
                serving = _Serving(env)
                await serving.start()
                self._serving[split] = serving
        return self._serving[split].env

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        import verifiers.v1 as vf

        env = await self._serving_env(request.split)
        task = self._task(env, request.example)
        started = time.time()

        async def one(rollout_id: str) -> Any:
            client = vf.EvalClientConfig(base_url=request.base_url(rollout_id), api_key_var=GATEWAY_KEY_VAR)
            ctx = vf.ModelContext(model=request.model, client=client)
            with attribute_to([rollout_id]):
                async with asyncio.timeout(request.timeout_s):
                    return await env.run_slot(env.slots(task)[0], ctx)

        outcomes = await asyncio.gather(*(one(rid) for rid in request.rollout_ids), return_exceptions=True)
        return [v1_results.result(request, rid, started, outcome)
                for rid, outcome in zip(request.rollout_ids, outcomes)]

    async def rescore(self, stored: RolloutResult) -> RolloutResult:
        """`stored` scored again by its task's `score(trace)` on the trace it kept (no runtime: signals that need
        one are skipped, as in `vf-replay`), with the env as it is now; its records land on the rollout."""
        if stored.native_trace is None:
            raise UserError(f"rollout {stored.rollout_id} has no stored verifiers trace to re-score")
        env = await asyncio.to_thread(self._env, stored.split)
        trace = v1_results.without_scores(stored.native_trace)
        task_cls = type(env.taskset).task_type()
        task = task_cls(task_cls.data_type().model_validate(trace.task.data.model_dump()), env.taskset.config.task)
        with attribute_to([stored.rollout_id]):
            try:
                await task.score(trace)
            except Exception as e:
                trace.record_error(e)
        reason, error = v1_results.termination(trace)
        return stored.model_copy(update={"termination_reason": reason, "error": error,
                                         "rewards": v1_results.components(trace) if reason in SCORED_REASONS else {},
                                         "native_trace": trace.to_record()})

    async def aclose(self) -> None:
        for serving in self._serving.values():
            await serving.close()
        self._serving.clear()
