"""Messages between an env server and its worker processes, one JSON object per line.

The server (`looprl.envserver.server.EnvServer`, in the orchestrator process) writes to a worker's
stdin; the worker (`looprl.envserver.worker`) answers on a private copy of its stdout (its real
stdout and stderr go to `env_worker_{id}.log`). Every message has a `kind` (written first); replies name the
request they answer by `id` (written second). A line is at most `env.max_message_bytes` long
(`looprl.envserver.lines`). Closing the worker's stdin asks it to close the env and exit.

While a group runs, the worker streams what must survive its death, in order, before `GroupDone`:
each captured log record (`RolloutLog`) as it is emitted, and each rollout as soon as it is settled
(`RolloutSettled`), when each `rollout_context` exit starts and completes (`ContextExit`), and when
`compute_group_rewards` starts (`GroupHookStarted`). `WorkerBlocked`
says env code holds the worker's event loop past a timeout. `ScoreGroup` asks a worker to run only
`compute_group_rewards`, for rollouts that waited for it on a worker that died before it started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from looprl.config.env_runtime import EnvRuntimeConfig
from looprl.envs.types import DatasetSplit, Example, GroupRequest, LogRecordData, RolloutResult


class WorkerConfig(BaseModel):
    """What a worker needs to start; produced by the server, consumed by the worker (argv[1])."""

    worker_id: int
    runtime: EnvRuntimeConfig
    """The env (`runtime.source`, `path/to/file.py:Class` or `package.module:Class`), its constructor's args,
    the level of env code's records (captured per rollout and written to the worker log), their limits and
    the log format."""


class WorkerReady(BaseModel):
    """Worker -> server: the env is constructed; the worker takes requests."""

    kind: Literal["ready"] = "ready"
    pid: int


class WorkerFailed(BaseModel):
    """Worker -> server: the env could not be loaded or constructed; the worker exits."""

    kind: Literal["failed"] = "failed"
    error: str


class CreateDataset(BaseModel):
    """Server -> worker: build a split's dataset. Answered by `DatasetReady` or `RequestFailed`."""

    kind: Literal["create_dataset"] = "create_dataset"
    id: str
    split: DatasetSplit
    base_dir: Path
    max_examples: int | None = None


class DatasetReady(BaseModel):
    """Worker -> server: the examples of a `CreateDataset`."""

    kind: Literal["dataset"] = "dataset"
    id: str
    examples: list[Example]


class RequestFailed(BaseModel):
    """Worker -> server: a `CreateDataset` raised; `error` is the exception, `user_error` whether it is
    a `UserError` (a message for the user, not a bug)."""

    kind: Literal["request_failed"] = "request_failed"
    id: str
    error: str
    user_error: bool = False


class RunGroup(BaseModel):
    """Server -> worker: run one group. Answered by `GroupDone` with the same `id` (the group id)."""

    kind: Literal["run_group"] = "run_group"
    id: str
    request: GroupRequest


class ScoreGroup(BaseModel):
    """Server -> worker: run `compute_group_rewards` on `rollouts` (done, with their `compute_reward`
    components), which waited for it on a worker that died before it started; `request` is their group's,
    narrowed to them. Answered by `GroupDone` with the same `id`."""

    kind: Literal["score_group"] = "score_group"
    id: str
    request: GroupRequest
    rollouts: list[RolloutResult]


class RolloutLog(BaseModel):
    """Worker -> server: one log record of a running rollout, sent when it is emitted."""

    kind: Literal["log"] = "log"
    rollout_id: str
    record: LogRecordData


class RolloutSettled(BaseModel):
    """Worker -> server: a rollout of group `id` is scored or failed before its group returns;
    `group_pending`: its `compute_group_rewards` components are still to come (a later report)."""

    kind: Literal["rollout"] = "rollout"
    id: str
    result: RolloutResult
    group_pending: bool = False


class ContextExit(BaseModel):
    """Worker -> server: the `rollout_context` exit of a rollout of group `id` starts (`done` False, sent
    before it runs) or has completed (`done` True). A worker that dies between the two fails that rollout,
    whatever it had scored (`looprl.envserver.settlement`)."""

    kind: Literal["context_exit"] = "context_exit"
    id: str
    rollout_id: str
    done: bool


class GroupHookStarted(BaseModel):
    """Worker -> server: `compute_group_rewards` of group `id` starts (sent before it runs). A worker that
    dies after this is not asked to score the group's waiting rollouts elsewhere: the hook may be what
    killed it."""

    kind: Literal["group_hook_started"] = "group_hook_started"
    id: str


class WorkerBlocked(BaseModel):
    """Worker -> server: env code running these rollouts has held the worker's event loop for
    `blocked_s`, past their timeout; `stack` is where the loop's thread is stuck. The server ends them
    as `timeout` and kills the worker."""

    kind: Literal["blocked"] = "blocked"
    rollout_ids: list[str]
    blocked_s: float
    stack: str


class GroupDone(BaseModel):
    """Worker -> server: one result per rollout of a `RunGroup` (or a `ScoreGroup`); their log records
    came as `RolloutLog`s (the results carry only the counts of dropped and truncated records)."""

    kind: Literal["group_done"] = "group_done"
    id: str
    results: list[RolloutResult]


ToWorker = Annotated[CreateDataset | RunGroup | ScoreGroup, Field(discriminator="kind")]
FromWorker = Annotated[WorkerReady | WorkerFailed | DatasetReady | RequestFailed | RolloutLog | RolloutSettled
                       | ContextExit | GroupHookStarted | WorkerBlocked | GroupDone, Field(discriminator="kind")]
_to_worker: TypeAdapter[ToWorker] = TypeAdapter(ToWorker)
_from_worker: TypeAdapter[FromWorker] = TypeAdapter(FromWorker)


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json().encode() + b"\n"


def decode_to_worker(line: bytes) -> CreateDataset | RunGroup | ScoreGroup:
    return _to_worker.validate_json(line)


def decode_from_worker(line: bytes) -> BaseModel:
    return _from_worker.validate_json(line)

