"""The exploration watch: one warning when most groups carry no signal for several steps in a row."""

from pathlib import Path

from looprl.orchestrator.collapse import ExplorationWatch


def test_warns_once_per_streak_with_a_link_to_such_a_group():
    watch = ExplorationWatch("run1", Path("runs/x"), steps=3, share=0.5)
    seen = [watch.observe(step, 4, 4 if step != 4 else 1, "r9") for step in range(1, 12)]
    # steps 1-3 without signal: warned at 3; step 4 had signal (reset); steps 5-11: warned once, at 7
    assert [i + 1 for i, w in enumerate(seen) if w] == [3, 7]
    assert seen[2].startswith("the policy stopped exploring: at each of steps 1-3 most groups (4 of 4 at step 3)")
    assert "http://127.0.0.1:8765/runs/run1/rollouts/r9 (looprl inspect runs/x)" in seen[2]


def test_half_or_fewer_groups_without_signal_is_no_streak():
    watch = ExplorationWatch("run1", Path("r"), steps=2)
    assert [watch.observe(step, 4, 2, None) for step in (1, 2, 3)] == [None, None, None]
    assert watch.observe(4, 0, 0, None) is None  # a step with no groups
