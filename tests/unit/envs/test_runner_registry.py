"""Which runner runs an env: the nearest registered base class's, whatever the order of registration; a
class that is no env is told so."""

import pytest

from looprl.envs import BaseEnv, _runner
from looprl.envs.runtime_api import EnvRunner, runner_class


class NoReward(BaseEnv):
    max_turns = 1

    def create_dataset(self, split):
        return []


def test_a_class_with_no_registered_base_is_a_type_error_naming_it():
    class NotAnEnv:
        pass

    with pytest.raises(TypeError, match=r"NotAnEnv is not an environment: subclass looprl\.envs\.BaseEnv"):
        runner_class(NotAnEnv)  # type: ignore[arg-type]


def test_looprls_hooks_are_the_defaults_whatever_was_registered_first(monkeypatch):
    class Foreign:  # another framework's base class, registered before looprl's
        def compute_reward(self, rollout):
            return {}

    monkeypatch.setattr(_runner, "_RUNNERS", {Foreign: EnvRunner, **_runner._RUNNERS})
    assert runner_class(NoReward) is EnvRunner and not EnvRunner.has_reward_hook(NoReward)
    assert EnvRunner.hook_problems(NoReward) == ["NoReward implements neither compute_reward nor compute_group_rewards"]
