"""Per-rollout log attribution: concurrency without leaks, group fan-out and narrowing, threads, tracebacks."""

import asyncio
import logging

import pytest

from looprl.envs import BaseEnv, Dataset
from looprl.envs.logging import LogLimits, attribute_to, install_capture, open_capture, close_capture, rollout_context
from looprl.envs.runtime import run_group_captured
from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer

logger = logging.getLogger("test_env")


def answer(body) -> Reply:
    return Reply("<answer>1</answer>")


class LoggingEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def compute_reward(self, rollout):
        for i in range(5):
            logger.info("rollout %s record %d", rollout.rollout_id, i)
            await asyncio.sleep(0)  # interleave with siblings
        await asyncio.create_task(self._spawned(rollout.rollout_id))
        await asyncio.to_thread(logger.warning, "from a thread for %s", rollout.rollout_id)
        try:
            raise KeyError("missing")
        except KeyError:
            logger.exception("failed for %s", rollout.rollout_id)
        return {"x": 1.0}

    async def _spawned(self, rid):
        logger.debug("debug from a task for %s", rid)
        logger.info("from a task for %s", rid)


async def test_no_record_leaks_across_many_concurrent_rollouts():
    install_capture("INFO")
    with ScriptedServer(answer) as server:
        groups = await run_groups(LoggingEnv(), server, [example(f"p{i}") for i in range(30)], group_size=4)
    results = [r for g in groups for r, _ in g]
    assert len(results) == 120
    for r in results:
        messages = [rec.message for rec in r.logs]
        assert all(r.rollout_id in m for m in messages), messages
        assert len(messages) == 8, messages  # 5 + task + thread + exception; DEBUG filtered by the env level
        exc = [rec for rec in r.logs if rec.exception]
        assert len(exc) == 1 and "KeyError: 'missing'" in exc[0].exception and exc[0].level_name == "ERROR"
        assert any(rec.logger == "test_env" and rec.lineno and rec.pathname.endswith("test_log_capture.py")
                   for rec in r.logs)


class GroupLoggingEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def compute_group_rewards(self, rollouts):
        logger.info("scoring group")
        out = {}
        for r in rollouts:
            with rollout_context(r.rollout_id):
                logger.info("scoring %s", r.rollout_id)
                out[r.rollout_id] = {"q": 1.0}
        return out


async def test_group_records_fan_out_and_narrow():
    install_capture("INFO")
    with ScriptedServer(answer) as server:
        (group,) = await run_groups(GroupLoggingEnv(), server, [example("p")], group_size=3)
    for r, _ in group:
        assert [rec.message for rec in r.logs] == ["scoring group", f"scoring {r.rollout_id}"]


async def test_env_level_and_noisy_loggers():
    install_capture("DEBUG")
    buf = open_capture("r-level")
    try:
        with attribute_to([buf]):
            logging.getLogger("mine").debug("kept")
            logging.getLogger("httpx").info("noise")
            logging.getLogger("httpx").warning("loud")
    finally:
        close_capture("r-level")
    assert [r.message for r in buf.records] == ["kept", "loud"]


def test_capture_is_bounded():
    install_capture("INFO")
    buf = open_capture("r-bounded", LogLimits(max_records=3, max_message_chars=10))
    try:
        with attribute_to([buf]):
            logger.info("x" * 50)
            for i in range(5):
                logger.info("short %d", i)
    finally:
        close_capture("r-bounded")
    assert len(buf.records) == 3 and buf.dropped == 3 and buf.truncated == 1
    assert buf.records[0].message.startswith("x" * 10) and "truncated" in buf.records[0].message


def test_records_outside_a_rollout_are_not_captured():
    install_capture("INFO")
    buf = open_capture("r-outside")
    logger.info("not in any rollout")
    close_capture("r-outside")
    assert buf.records == []


def test_rollout_context_helper_rejects_unknown_ids():
    with pytest.raises(ValueError, match="no rollout"):
        with rollout_context("nope"):
            pass


async def test_capture_attaches_logs_even_when_run_group_raises():
    class Broken(BaseEnv):
        max_turns = 1

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([])

        async def compute_reward(self, rollout):
            return {}

        async def run_group(self, request):
            logger.info("about to break")
            raise RuntimeError("broken loop")

    install_capture("INFO")
    from looprl.envs.types import GroupRequest

    request = GroupRequest(group_id="g", example=example(), split="train", rollout_ids=["a", "b"], model="m",
                           base_url_template="http://127.0.0.1:9/{rollout_id}")
    results = await run_group_captured(Broken(), request)
    assert [r.termination_reason for r in results] == ["env_error", "env_error"]
    assert all("broken loop" in r.error and r.logs[0].message == "about to break" for r in results)
