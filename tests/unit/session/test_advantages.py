"""Rewards to advantages: zero-fill across the batch, group baselines, skipped groups."""

import pytest

from looprl.config import OrchestratorConfig
from looprl.envs.types import RolloutResult
from looprl.session.advantages import batch_advantages, group_advantages, step_baseline
from looprl.session.rewards import component_names, reward_stats, rollout_reward, zero_filled

MEAN_ONLY = OrchestratorConfig(normalize_std=False)


def _result(rid: str, rewards: dict[str, float], reason: str = "finished") -> RolloutResult:
    return RolloutResult(rollout_id=rid, group_id="g", example_id="e", split="train", messages=[],
                         termination_reason=reason, rewards=rewards, started_at=0.0, finished_at=1.0)


def test_mean_baseline():
    out = group_advantages([1.0, 0.0, 0.0, 1.0], normalize_std=False)
    assert out.advantages == [0.5, -0.5, -0.5, 0.5]
    assert not out.skipped


def test_std_normalisation():
    out = group_advantages([3.0, 1.0], normalize_std=True)  # mean 2, std 1
    assert out.advantages == [pytest.approx(1.0, abs=1e-5), pytest.approx(-1.0, abs=1e-5)]


@pytest.mark.parametrize("rewards", [[1.0, 1.0, 1.0], [0.0, 0.0], [0.7, None, None]])
def test_groups_without_signal_are_skipped(rewards):
    assert group_advantages(rewards, normalize_std=True).skipped


def test_failed_rollouts_stay_out_of_the_baseline_by_default():
    group = [_result("a", {"correct": 1.0}), _result("b", {"correct": 0.0}), _result("c", {}, reason="timeout")]
    [out] = batch_advantages([group], MEAN_ONLY)
    assert out.rewards == [1.0, 0.0, None]
    assert out.advantages == [0.5, -0.5, None]


def test_failed_rollouts_can_count_as_zero():
    group = [_result("a", {"correct": 1.0}), _result("b", {"correct": 1.0}), _result("c", {}, reason="env_error")]
    [out] = batch_advantages([group], OrchestratorConfig(include_failed=True, normalize_std=False))
    assert out.rewards == [1.0, 1.0, 0.0]
    assert out.advantages == pytest.approx([1 / 3, 1 / 3, -2 / 3])


def _group(gid: str, *correct: float) -> list[RolloutResult]:
    return [_result(f"{gid}{k}", {"correct": c}) for k, c in enumerate(correct)]


BATCH_BASELINE = OrchestratorConfig(normalize_std=False, unanimous_groups="batch_baseline")


def test_unanimous_groups_train_against_the_steps_mean_reward():
    """One answer to every question: each group is all right or all wrong, no signal against its own mean; against
    the step's mean (0.5) the wrong ones are pushed down and the right ones up. A group with signal keeps its own."""
    right, wrong, mixed = _group("a", 1, 1), _group("b", 0, 0), _group("c", 1, 0)
    out = batch_advantages([right, wrong, mixed], BATCH_BASELINE)
    assert [a.advantages for a in out] == [[0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]]
    assert [a.against_batch for a in out] == [True, True, False] and not any(a.skipped for a in out)
    assert [a.unanimous for a in out] == [True, True, False]  # the collapse watch still counts them
    assert batch_advantages([right, wrong, mixed], MEAN_ONLY)[0].skipped  # the default: GRPO's rule


def test_a_step_where_every_reward_is_alike_stays_without_signal():
    out = batch_advantages([_group("a", 1, 1), _group("b", 1, 1)], BATCH_BASELINE)  # solved: nothing to learn
    assert all(a.skipped and not a.against_batch and a.unanimous for a in out)
    [one] = batch_advantages([_group("a", 0, 0)], BATCH_BASELINE)  # dynamic sampling asks of one group alone
    assert one.skipped


def test_the_steps_baseline_leaves_failed_groups_out_and_scales_by_its_std():
    failed = [_result("f0", {}, reason="timeout"), _result("f1", {}, reason="timeout")]
    groups = [_group("a", 1, 1), _group("b", 0, 0), _group("c", 0, 0), failed]
    baseline = step_baseline(batch_advantages(groups, BATCH_BASELINE))
    assert baseline is not None and baseline.mean == pytest.approx(1 / 3)
    out = batch_advantages(groups, OrchestratorConfig(unanimous_groups="batch_baseline"))
    assert out[0].advantages == pytest.approx([(1 - 1 / 3) / (baseline.std + 1e-6)] * 2)
    assert out[3].failed and out[3].advantages == [None, None] and not out[3].unanimous


def test_component_weights_and_zero_fill():
    a, b = _result("a", {"correct": 1.0, "format": 0.5}), _result("b", {"correct": 1.0})
    assert rollout_reward(a, {"format": 2.0}) == 2.0
    names = component_names([a, b])
    assert names == ["correct", "format"]
    assert zero_filled(b.rewards, names) == {"correct": 1.0, "format": 0.0}
    stats = reward_stats([a, b])
    assert stats["reward/format"] == 0.25 and stats["reward"] == 1.25
    [out] = batch_advantages([[a, b]], MEAN_ONLY)
    assert out.advantages == [0.25, -0.25]


def test_a_weight_no_rollout_emits_warns_once_naming_the_emitted_components():
    import io

    from looprl.session.rewards import UnusedWeights
    from looprl.utils.logger import reset_logger, setup_logger

    out = io.StringIO()
    setup_logger("info", sink=out)
    try:
        check = UnusedWeights({"correct": 1.0, "typo": 2.0, "bonus": 0.5})
        assert check.check(1, [_result("a", {}, reason="error")]) == []  # nothing scored: no verdict yet
        step = [_result("a", {"correct": 1.0}), _result("b", {"correct": 0.0, "brief": 1.0})]
        assert check.check(2, step) == ["bonus", "typo"]
        assert check.check(3, step) == []  # once per name
    finally:
        reset_logger()
    log = out.getvalue()
    assert "WARNING" in log and "'typo'" in log and "step 2" in log and "emitted: correct, brief" in log
    assert log.count("'typo'") == 1


def test_the_config_holds_the_one_default_std_division():
    group = [_result("a", {"correct": 3.0}), _result("b", {"correct": 1.0})]  # mean 2, std 1
    [out] = batch_advantages([group], OrchestratorConfig())
    assert out.advantages == [pytest.approx(1.0, abs=1e-5), pytest.approx(-1.0, abs=1e-5)]
