"""`rescore`: stored groups re-scored as they ran, totals and advantages by the run's rule, logs per rollout."""

import logging
import time

import pytest

from looprl.commands.rescore.rescoring import rescore
from looprl.commands.stored import prompt_messages, reward_settings, stored_example
from looprl.config import OrchestratorConfig
from looprl.envs import BaseEnv, Dataset
from looprl.envs.logging import rollout_context
from looprl.envserver.capture import install_capture
from looprl.store.records import RolloutRecord, RunInfo

logger = logging.getLogger("rescore_test")
PROMPT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]


def record(rid: str, group: str, answer: str, reason: str = "finished", rewards=None, reward=None) -> RolloutRecord:
    messages = [*PROMPT, {"role": "assistant", "content": answer}] if reason != "model_error" else list(PROMPT)
    return RolloutRecord(rollout_id=rid, group_id=group, example_id="ex1", split="train", messages=messages,
                         example_args={"answer": "4"}, termination_reason=reason, rewards=rewards or {},
                         reward=reward, started_at=time.time(), finished_at=time.time(), run_id="run",
                         env_name="Env")


class LengthEnv(BaseEnv):
    """`correct` per rollout, `shortest` for the group's shortest answer."""

    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([])

    async def compute_reward(self, rollout):
        answer = rollout.messages[-1]["content"]
        logger.info("scoring %s", answer)
        if answer == "boom":
            raise ValueError("cannot score boom")
        return {"correct": float(answer == rollout.example_args["answer"])}

    async def compute_group_rewards(self, rollouts):
        logger.info("group of %d", len(rollouts))
        shortest = min(rollouts, key=lambda r: len(r.messages[-1]["content"]))
        with rollout_context(shortest.rollout_id):
            logger.info("shortest")
        return {r.rollout_id: {"shortest": float(r is shortest)} for r in rollouts}


@pytest.fixture(autouse=True)
def _capture():
    install_capture("INFO")


async def test_groups_are_rescored_with_new_totals_advantages_and_logs():
    records = [record("a", "g1", "4", rewards={"correct": 1.0}, reward=1.0),
               record("b", "g1", "four!", rewards={"correct": 1.0}, reward=1.0),
               record("c", "g2", "4", rewards={"correct": 1.0}, reward=1.0)]
    groups = await rescore(LengthEnv(), records, OrchestratorConfig(batch_size=8, group_size=2))
    by_id = {i.before.rollout_id: i for g in groups for i in g}
    assert [len(g) for g in groups] == [2, 1]
    assert by_id["a"].after.rewards == {"correct": 1.0, "shortest": 1.0} and by_id["a"].reward == 2.0
    assert by_id["b"].after.rewards == {"correct": 0.0, "shortest": 0.0} and by_id["b"].reward == 0.0
    # (r - mean) / (std + eps): mean 1, std 1
    assert by_id["a"].advantage == 1 / (1 + 1e-6) and by_id["b"].advantage == -1 / (1 + 1e-6)
    assert by_id["c"].advantage is None  # a lone rollout: no learning signal, stored as None
    assert all(i.changed for i in by_id.values())
    assert [r.message for r in by_id["a"].logs] == ["scoring 4", "group of 2", "shortest"]
    assert [r.message for r in by_id["b"].logs] == ["scoring four!", "group of 2"]


async def test_weights_failures_and_hook_errors():
    records = [record("a", "g", "4", rewards={"correct": 1.0}, reward=1.0),
               record("b", "g", "boom", rewards={"correct": 0.0}, reward=0.0),
               record("c", "g", "4", reason="reward_error"),
               record("d", "g", "", reason="model_error")]
    settings = OrchestratorConfig(batch_size=4, group_size=4, reward_weights={"shortest": 0.5})
    group = {i.before.rollout_id: i for i in (await rescore(LengthEnv(), records, settings))[0]}
    assert group["b"].after.termination_reason == "reward_error" and "cannot score boom" in group["b"].after.error
    assert group["b"].reward is None and group["b"].changed
    assert group["c"].rescored and group["c"].after.scored  # its reward hook failed before: scored again
    assert group["d"].after is group["d"].before and not group["d"].rescored and not group["d"].changed
    assert {group["a"].reward, group["c"].reward} == {1.5, 1.0}  # `shortest` weighs 0.5 (ties: the first)


def test_the_example_is_rebuilt_from_the_row():
    r = record("a", "g", "4")
    assert prompt_messages(r.messages) == PROMPT
    example = stored_example(r)
    assert example.id == "ex1" and example.prompt_messages == PROMPT and example.example_args == {"answer": "4"}


def test_reward_settings_of_an_rl_run_and_an_eval_run():
    rl = RunInfo(run_id="r", kind="rl", env="e.py:E", env_name="E", model="m", created_at=0,
                 config={"orchestrator": {"batch_size": 4, "group_size": 2, "reward_weights": {"x": 2.0},
                                          "normalize_std": True}})
    assert reward_settings(rl).reward_weights == {"x": 2.0} and reward_settings(rl).normalize_std
    assert reward_settings(rl.model_copy(update={"kind": "eval", "config": {}})).reward_weights == {}
    weighted_eval = rl.model_copy(update={"kind": "eval", "config": {"reward_weights": {"x": 3.0}}})
    assert reward_settings(weighted_eval).reward_weights == {"x": 3.0}  # `looprl eval --reward-weights`
