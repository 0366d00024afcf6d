"""step_N directories: which exist, when a checkpoint or a broadcast is complete (one definition for all)."""

from looprl.handoff import latest_checkpoint, mark_stable, newest_broadcast, step_dirs
from looprl.paths import broadcast_dir, broadcasts_dir, checkpoint_dir, progress_path


def test_step_dirs_are_numbered_in_order_and_skip_temporary_and_odd_names(tmp_path):
    assert step_dirs(tmp_path / "missing") == {}
    for name in ("step_10", "step_2", ".step_3.tmp", "step_x", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "step_4").write_text("a file, not a step directory")
    assert step_dirs(tmp_path) == {2: tmp_path / "step_2", 10: tmp_path / "step_10"}


def test_a_checkpoint_is_complete_once_its_progress_is_written(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for step in (1, 3):
        progress_path(tmp_path, step).parent.mkdir(parents=True)
        progress_path(tmp_path, step).write_text("{}")
    checkpoint_dir(tmp_path, 5).mkdir()  # being written: no progress.json yet
    assert latest_checkpoint(tmp_path) == 3


def test_a_broadcast_is_complete_once_marked_stable(tmp_path):
    assert newest_broadcast(tmp_path) is None
    for step in (1, 2, 3):
        broadcast_dir(tmp_path, step).mkdir(parents=True)
    mark_stable(broadcast_dir(tmp_path, 1))
    mark_stable(broadcast_dir(tmp_path, 2))
    (broadcasts_dir(tmp_path) / ".step_4.tmp").mkdir()
    assert newest_broadcast(tmp_path) == 2
