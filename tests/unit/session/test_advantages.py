"""Rewards to advantages: zero-fill across the batch, group baselines, skipped groups."""

import pytest

from looprl.config import OrchestratorConfig
from looprl.envs.types import RolloutResult
from looprl.session.advantages import batch_advantages, group_advantages
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


def test_mask_truncated_masks_a_cut_off_reply_only_beside_a_finished_one():
    """`mask_truncated`: cut-off replies leave the loss where a sibling finished (their rewards stay in the mean); a
    group in which none finished keeps its advantages, and a failure counted as 0 (`include_failed`) is no finished
    sibling."""
    rule = OrchestratorConfig(mask_truncated=True, include_failed=True, normalize_std=False)
    beside = [_result("a", {"c": 1.0}), _result("b", {"c": 0.0}, "output_exceeded"), _result("c", {"c": 0.5})]
    all_cut = [_result("d", {"c": 1.0}, "output_exceeded"), _result("e", {"c": 0.0}, "context_exceeded")]
    with_failure = [*all_cut, _result("f", {}, "env_error")]
    masked, kept, failed = batch_advantages([beside, all_cut, with_failure], rule)
    assert masked.advantages == pytest.approx([0.5, None, 0.0]) and masked.masked == 1 and not masked.skipped
    assert kept.advantages == pytest.approx([0.5, -0.5]) and kept.masked == 0
    assert failed.advantages == pytest.approx([2 / 3, -1 / 3, -1 / 3]) and failed.masked == 0


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
