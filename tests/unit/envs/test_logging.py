"""Log attribution as env code sees it: concurrency without leaks, group fan-out and narrowing, threads, tracebacks."""

import asyncio
import logging

import pytest
from tests.support.harness import example, run_groups
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.envs import BaseEnv, Dataset
from looprl.envs.logging import rollout_context
from looprl.envserver.capture import install_capture

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
        assert any(rec.logger == "test_env" and rec.lineno and rec.pathname.endswith("test_logging.py")
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


def test_rollout_context_helper_rejects_unknown_ids():
    with pytest.raises(ValueError, match="no rollout"), rollout_context("nope"):
        pass
