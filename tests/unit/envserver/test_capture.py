"""Per-rollout log capture in env hosts: env level, noisy loggers, bounds, and a run_group that raises."""

import logging

from tests.support.harness import example

from looprl.config import LogLimits
from looprl.envs import BaseEnv, Dataset
from looprl.envs.logging import attribute_to
from looprl.envs.types import GroupRequest
from looprl.envserver.capture import close_capture, install_capture, open_capture
from looprl.envserver.runtime import run_group_captured

logger = logging.getLogger("test_env")


async def test_env_level_and_noisy_loggers():
    install_capture("DEBUG")
    buf = open_capture("r-level")
    try:
        with attribute_to([buf.rollout_id]):
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
        with attribute_to([buf.rollout_id]):
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
    request = GroupRequest(group_id="g", example=example(), split="train", rollout_ids=["a", "b"], model="m",
                           base_url_template="http://127.0.0.1:9/{rollout_id}")
    results = await run_group_captured(Broken(), request)
    assert [r.termination_reason for r in results] == ["env_error", "env_error"]
    assert all("broken loop" in r.error and r.logs[0].message == "about to break" for r in results)
