"""The exploration watch: one warning when most groups carry no signal for several steps in a row."""

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

from looprl.session.advantages import GroupAdvantages
from looprl.session.collapse import ExplorationWatch, step_counts

ROOT = Path(__file__).resolve().parents[3]


def group(*rewards: float | None) -> GroupAdvantages:
    return GroupAdvantages(list(rewards), [0.0] * len(rewards), skipped=len(set(rewards)) == 1)


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
    watch = ExplorationWatch()
    assert watch.solved([group(1.5, 1.5), group(0.0, 1.5)]) == 1
    assert watch.solved([group(1.5, 1.5), group(0.5, 0.5)]) == 0  # an all-0.5 group too: none count as solved
    assert watch.solved([group(1.0, 1.0)]) == 0 and watch.best == 1.5  # all alike below the run's best
    assert watch.solved([group(None, None)]) == 0
    fresh = ExplorationWatch()
    assert fresh.solved([group(0.0, 0.0)]) == 0  # every reward alike since the start: not solved


def test_a_partial_reward_is_not_solved_when_the_config_names_the_solving_one():
    """examples/two_digit, one seed: every reply wrote the equation with a wrong sum (format 0.5 of 1.5) from
    early on; by the best reward seen that looked solved, by `solved_reward` = 1.5 it is stuck."""
    blind, told = ExplorationWatch(), ExplorationWatch(solved_reward=1.5)
    for watch in (blind, told):
        watch.solved([group(0.0, 0.5)])
    assert blind.solved([group(0.5, 0.5), group(0.5, 0.5)]) == 2
    assert told.solved([group(0.5, 0.5), group(0.5, 0.5)]) == 0
    assert told.solved([group(1.5, 1.5), group(0.0, 1.5)]) == 1
    assert told.overshoot() is None


def test_a_given_solved_reward_counts_a_task_solved_from_the_first_step():
    """Every rollout right from the start is a solved task, not one the run cannot learn (which the best seen,
    with no worse reward yet, cannot tell)."""
    assert ExplorationWatch(solved_reward=1.0).solved([group(1.0, 1.0)]) == 1
    assert ExplorationWatch().solved([group(1.0, 1.0)]) == 0


def test_a_reward_above_solved_reward_is_said_once():
    watch = ExplorationWatch(solved_reward=1.0)
    watch.solved([group(1.5, 0.0)])
    warning = watch.overshoot()
    assert warning is not None and "1.5 is above orchestrator.collapse.solved_reward = 1" in warning
    assert watch.overshoot() is None


@pytest.mark.parametrize("groups", [
    [[1.5] * 8, [1.5] * 8, [0.5, 1.5] * 4, [0.5, 1.0] * 4],  # the groups without signal all solved: none count
    [[1.5] * 8, [0.0] * 8, [0.5, 1.5] * 4, [1.0] * 8],  # one all wrong among them: all count (a collapse)
    [[0.0] * 8, [0.0] * 8, [0.0] * 8, [0.0] * 8],
    [[0.5, 1.5] * 4] * 4,
])
def test_the_learning_benchmark_counts_a_trl_step_as_the_watch_counts_looprls(groups):
    """`bench/learning.py` judges TRL's steps stuck or not by the rewards alone; it must agree with the collapse
    watch, which judges looprl's (`step_counts` of the stored metrics), or the matrix compares two criteria."""
    learning = learning_benchmark()
    advantages = [group(*g) for g in groups]
    solved = ExplorationWatch(solved_reward=1.5).solved(advantages)
    metrics = {"groups_sampled": len(groups), "groups_skipped": sum(a.skipped for a in advantages),
               "groups_solved": solved}
    sampled, stuck = step_counts(metrics)
    assert learning.stuck_share([r for g in groups for r in g], 8, 1.5) == stuck / sampled


def learning_benchmark():
    """`bench/learning.py`, imported as a module."""
    spec = importlib.util.spec_from_file_location("learning", ROOT / "bench" / "learning.py")
    learning = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(learning)
    return learning


def test_the_learning_matrix_tells_a_plateau_from_steps_that_train_nothing():
    """Issue 37's stall, both readings: 8 of 10 steps with most groups without signal while unsolved (a plateau
    with a few questions wrong every time is one), and the stricter first reading, every group without signal."""
    learning = learning_benchmark()
    plateau = [(10.0 * i, i, 1.25, 0.625) for i in range(1, 11)]  # (seconds, step, reward, share without signal)
    collapse = [(10.0 * i, i, 0.5, 1.0) for i in range(1, 11)]
    assert learning.stalled(plateau, 1.5) and not learning.stalled_training_nothing(plateau, 1.5)
    assert learning.stalled(collapse, 1.5) and learning.stalled_training_nothing(collapse, 1.5)


def test_the_learning_matrix_keeps_no_seed_measured_on_another_processor(tmp_path, monkeypatch):
    """Seconds to a reward are one machine's (TRL's demo step: 36 s on an Intel core with AMX, 70 s on an AMD one
    without): `run_systems` resumes a results.json measured on this processor and measures again one that was not."""
    learning = learning_benchmark()
    measured: list[int] = []

    def run_looprl(args, seed, out, system):
        measured.append(seed)
        return [(10.0, 1, 1.0, 0.0)]

    monkeypatch.setattr(learning, "run_looprl", run_looprl)
    monkeypatch.setattr(learning, "settings", lambda args: [])
    args = argparse.Namespace(task="demo", budget_s=60.0, lr=2e-5, looprl_args="", stop_at=None, stop_window=1,
                              first_seed=0, seeds=1, systems=["looprl"], out=str(tmp_path / "runs"))
    path = tmp_path / "demo" / "results.json"
    assert learning.run_systems(args, path)["cpu"] == learning.cpu() and measured == [0]
    assert learning.run_systems(args, path)["runs"]["looprl"] == [[[10.0, 1, 1.0, 0.0]]] and measured == [0]
    path.write_text(json.dumps(json.loads(path.read_text()) | {"cpu": "another processor, 2 cores, with AMX"}))
    learning.run_systems(args, path)
    assert measured == [0, 0] and json.loads(path.read_text())["cpu"] == learning.cpu()


def test_the_learning_matrix_sets_lanes_of_one_comparison_side_by_side(tmp_path):
    """looprl and TRL measured in parallel, one a core, each in its own --results-dir, are one comparison when
    their protocol and processor agree: `--summarize` merges them (one matrix row, the ratios); a lane of the same
    system, or one measured on another processor, stays apart."""
    learning = learning_benchmark()
    base = {"task": "large_number", "budget_s": 1400.0, "lr": 2e-5, "looprl_args": "", "stop_at": 0.95,
            "stop_window": 3, "first_seed": 3, "cpu": "AMD EPYC, 2 cores, without AMX", "settings": [["lr", "2e-05",
            "2e-05"]], "max_reward": 1.0}

    def lane(system: str, **changes) -> dict:
        return base | changes | {"seeds": 1, "runs": {system: [[[10.0, 1, 0.5, 0.0]]]},
                                 "load_average": {system: "1.0-2.0"}, "classes": {system: [None]}}

    files = [(tmp_path / "looprl" / "results.json", lane("looprl")), (tmp_path / "trl" / "results.json", lane("trl")),
             (tmp_path / "again" / "results.json", lane("looprl")),
             (tmp_path / "intel" / "results.json", lane("trl", cpu="Intel, 2 cores, with AMX"))]
    merged = learning.merge_lanes(files)
    assert list(merged) == [tmp_path / "looprl", tmp_path / "again", tmp_path / "intel"]
    both = merged[tmp_path / "looprl"]
    assert learning.systems_of(both) == ["looprl", "trl"] and set(both["classes"]) == {"looprl", "trl"}
    assert [len(learning.systems_of(r)) for r in merged.values()] == [2, 1, 1]
    rows = [line for line in learning.matrix(list(merged.values())) if line.startswith("large_number")]
    assert len(rows) == 3
