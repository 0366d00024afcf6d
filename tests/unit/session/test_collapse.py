"""The exploration watch: one warning when most groups carry no signal for several steps in a row."""

from looprl.session.collapse import ExplorationWatch


def test_warns_once_per_streak():
    watch = ExplorationWatch(steps=3, share=0.5)
    seen = [watch.observe(step, 4, 4 if step != 4 else 1) for step in range(1, 12)]
    # steps 1-3 without signal: warned at 3; step 4 had signal (reset); steps 5-11: warned once, at 7
    assert [i + 1 for i, warn in enumerate(seen) if warn] == [3, 7]
    assert watch.warning(11, 4, 3, "r9: http://x").startswith(
        "the policy stopped exploring: at each of steps 5-11 most groups (3 of 4 at step 11) gave every rollout "
        "the same reward, so they taught nothing; e.g. rollout r9: http://x (docs/training.md, 'Collapse'")


def test_half_or_fewer_groups_without_signal_is_no_streak():
    watch = ExplorationWatch(steps=2)
    assert [watch.observe(step, 4, 2) for step in (1, 2, 3)] == [False, False, False]
    assert not watch.observe(4, 0, 0)  # a step with no groups


def test_groups_all_at_the_best_reward_are_solved_not_stuck():
    """A policy that learned the task gives every rollout the maximum: those groups are not a collapse."""
    from looprl.session.advantages import GroupAdvantages

    def group(*rewards):
        return GroupAdvantages(list(rewards), [0.0] * len(rewards), skipped=len(set(rewards)) == 1)

    watch = ExplorationWatch()
    assert watch.solved([group(1.5, 1.5), group(0.0, 1.5)]) == 1
    assert watch.solved([group(1.5, 1.5), group(0.5, 0.5)]) == 0  # an all-0.5 group too: none count as solved
    assert watch.solved([group(1.0, 1.0)]) == 0 and watch.best == 1.5  # all alike below the run's best
    assert watch.solved([group(None, None)]) == 0
    fresh = ExplorationWatch()
    assert fresh.solved([group(0.0, 0.0)]) == 0  # every reward alike since the start: not solved
