"""A small `rl` run store for the inspector's tests: steps with metrics, train and eval rollouts,
a zero-filled component (marked per batch, as the orchestrator does), failures with errors, log
records at every level, and XSS payloads in a message, a tool result and a log record (they must
show up as text)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from looprl.envs.types import LogRecordData, RolloutResult
from looprl.session.rewards import mark_zero_filled
from looprl.store.records import ModelCall, RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter

XSS_MESSAGE = "<script>alert(1)</script> in a message"
XSS_TOOL = "<img src=x onerror=alert(2)> from the tool"
XSS_LOG = "<img src=x onerror=alert(3)><script>alert(4)</script> logged"
T0 = 1_700_000_000.0


def record(i: int, *, step: int, split: str = "train", group: int = 0, reason: str = "finished",
           rewards: dict[str, float] | None = None, logs: list[tuple[int, str, str]] = (), text: str = "What is 2+2?",
           tool_result: str = "4", exception: str | None = None, run_id: str = "run-1") -> RolloutRecord:
    started = T0 + 100 * step + i
    failed = reason not in ("finished", "max_turns_exceeded")
    rewards = {} if failed else (rewards if rewards is not None else {"correct": 1.0, "format": 0.5})
    result = RolloutResult(
        rollout_id=f"{split}-{step}-{i}", group_id=f"{split}-{step}-g{group}", example_id=f"ex{group}", split=split,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": text},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1", "type": "function",
                       "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]},
                  {"role": "tool", "tool_call_id": "call_1", "name": "add", "content": tool_result},
                  {"role": "assistant", "content": "The answer is 4."}],
        example_args={"answer": 4}, termination_reason=reason, error=f"{reason}: it broke" if failed else None,
        rewards=rewards, turns=2, tool_calls=1, started_at=started, finished_at=started + 2.5,
        logs=[LogRecordData(time=started + 0.1 * k, level=level, level_name=name, logger=logger, message=msg,
                            func="compute_reward", lineno=10 + k, pathname="env.py",
                            exception=exception if level >= 40 else None)
              for k, (level, logger, msg) in enumerate(logs)
              for name in [{10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR"}[level]]],
    )
    calls = [ModelCall(rollout_id=result.rollout_id, idx=k, started_at=started + k, latency_s=0.25, finish_reason=f,
                       prompt_tokens=20, completion_tokens=8) for k, f in enumerate(["tool_calls", "stop"])]
    reward = None if failed else sum(rewards.values())
    return RolloutRecord.from_result(result, run_id=run_id, env_name="toy", step=step, reward=reward,
                                     advantage=None if reward is None else reward - 1.0, model_calls=calls)


def build_store(run_dir: Path, *, run_id: str = "run-1", status: str = "running") -> Path:
    """Write the fake run to `run_dir`; rollout ids are `{split}-{step}-{i}`."""
    w = RunStoreWriter(run_dir)
    w.start_run(RunInfo(run_id=run_id, kind="rl", env="toy.py:ToyEnv", env_name="toy", model="tiny-model",
                        created_at=T0, config={"orchestrator": {"normalize_std": False}}))  # advantage: r - mean
    info, warn, err = 20, 30, 40
    step_0 = [
        record(0, step=0, group=0, logs=[(info, "toy", "scoring rollout 0"), (10, "toy.debug", "details")],
               run_id=run_id),
        record(1, step=0, group=0, rewards={"correct": 0.0}, logs=[(warn, "toy", "format missing")], run_id=run_id),
        record(2, step=0, group=1, reason="tool_error", logs=[(err, "toy.tools", "tool crashed")],
               exception="Traceback (most recent call last):\nValueError: bad", run_id=run_id),
        record(3, step=0, group=1, text=XSS_MESSAGE, tool_result=XSS_TOOL, logs=[(info, "toy", XSS_LOG)],
               run_id=run_id),
    ]
    mark_zero_filled(step_0)
    w.write_rollouts(step_0)
    w.write_step(run_id, 0, {"reward": 1.1, "reward/correct": 0.66, "loss": 0.5, "entropy": 1.2, "lr": 1e-6})
    batches = [
        [record(4, step=1, group=0, rewards={"correct": 1.0, "format": 1.0}, text="needle in the haystack",
                run_id=run_id),
         record(5, step=1, group=0, reason="max_turns_exceeded", rewards={"correct": 0.0, "format": 0.0},
                logs=[(info, "toy", "unique-log-marker")], run_id=run_id)],
        [record(6, step=2, group=0, reason="timeout", run_id=run_id),
         record(7, step=2, group=0, rewards={"correct": 1.0, "format": 1.0}, run_id=run_id)],
        [record(0, step=2, split="eval", group=0, rewards={"correct": 1.0}, run_id=run_id),
         record(1, step=2, split="eval", group=0, rewards={"correct": 0.0, "style": 0.5}, run_id=run_id)],
    ]
    for batch in batches:
        mark_zero_filled(batch)
    w.write_rollouts([r for batch in batches for r in batch])
    w.write_step(run_id, 1, {"reward": 1.5, "reward/correct": 0.8, "loss": 0.4, "entropy": 1.1, "lr": 1e-6,
                             "note": "text"})
    w.write_step(run_id, 2, {"reward": 2.0, "reward/correct": 1.0, "loss": 0.3, "entropy": 1.0, "lr": 1e-6})
    if status != "running":
        w.finish_run(run_id, status, {"steps": 3})
    w.close()
    return run_dir


def mark_collapse_recovery(run_dir: Path) -> None:
    """Steps 0-2 as `[orchestrator.collapse]` writes them: every group without signal at step 1 raises the
    temperature 1 -> 1.25 and puts the entropy bonus in; signal again at step 2 decays it to 1.15, and the bonus is
    held off there, the entropy of step 1 being above its ceiling."""
    bonus = {"collapse/entropy_coef": 0.01, "collapse/entropy_limit": 1.2, "collapse/entropy_start": 1.2}
    stored = {0: {"collapse/temperature": 1.0, "collapse/attempt": 0.0},
              1: {"collapse/temperature": 1.25, "collapse/attempt": 1.0, "collapse/raise": 1.0,
                  "collapse/entropy_on": 1.0, "collapse/entropy_held": 0.0, **bonus},
              2: {"collapse/temperature": 1.15, "collapse/attempt": 0.0, "collapse/decay": 1.0,
                  "collapse/entropy_held": 1.0, "collapse/entropy_off": 1.0, "collapse/entropy_read": 1.5,
                  "collapse/entropy_read_step": 1.0, **bonus}}
    with sqlite3.connect(run_dir / "looprl.db") as db:
        for step, metrics in stored.items():
            db.execute("UPDATE steps SET metrics=? WHERE step=?",
                       (json.dumps({"groups_sampled": 4, "groups_skipped": 4 if step < 2 else 1, **metrics}), step))
