"""`--resume` picks the latest complete checkpoint and removes every file of the steps after it."""

from looprl.launch.rl_command import resumable_step
from looprl.paths import batch_path, broadcast_dir, checkpoint_dir, progress_path


def test_resume_from_the_latest_complete_checkpoint_drops_later_steps(tmp_path):
    for step in (2, 4):
        progress_path(tmp_path, step).parent.mkdir(parents=True)
        progress_path(tmp_path, step).write_text("{}")
    checkpoint_dir(tmp_path, 6).mkdir()  # being written when the run died: no progress.json
    for step in range(1, 7):
        batch_path(tmp_path, step).parent.mkdir(parents=True)
        batch_path(tmp_path, step).write_text("{}")
        broadcast_dir(tmp_path, step).mkdir(parents=True)
    assert resumable_step(tmp_path) == 4
    assert sorted(p.name for p in (tmp_path / "steps").iterdir()) == ["step_1", "step_2", "step_3", "step_4"]
    assert sorted(p.name for p in (tmp_path / "broadcasts").iterdir()) == ["step_1", "step_2", "step_3", "step_4"]


def test_resume_before_the_first_checkpoint_starts_over_in_the_same_run(tmp_path):
    for step in (1, 2):
        batch_path(tmp_path, step).parent.mkdir(parents=True)
        broadcast_dir(tmp_path, step).mkdir(parents=True)
    assert resumable_step(tmp_path) == 0
    assert not any((tmp_path / "steps").iterdir()) and not any((tmp_path / "broadcasts").iterdir())


def test_resume_drops_every_shared_memory_broadcast(tmp_path):
    """Its region ended with the run that made it: the resumed trainer broadcasts its restored weights again."""
    from looprl.handoff import mark_stable
    from looprl.handoff.shared_weights import SharedWeights, write_message

    progress_path(tmp_path, 2).parent.mkdir(parents=True)
    progress_path(tmp_path, 2).write_text("{}")
    for step in (1, 2):
        broadcast_dir(tmp_path, step).mkdir(parents=True)
        mark_stable(broadcast_dir(tmp_path, step))
    write_message(broadcast_dir(tmp_path, 2), SharedWeights(region="/dev/shm/gone", version=2, nbytes=64, tensors=[]))
    assert resumable_step(tmp_path) == 2
    assert sorted(p.name for p in (tmp_path / "broadcasts").iterdir()) == ["step_1"]
