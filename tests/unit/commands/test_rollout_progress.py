"""Rollout progress when stdout is not a terminal: plain lines with the count and the mean reward."""

import io

from looprl.commands.eval.progress import RolloutProgress


def test_piped_progress_prints_lines_as_groups_finish():
    stream = io.StringIO()
    with RolloutProgress(4, stream=stream, interval_s=0) as progress:
        progress.advance([1.0, 0.0])
        progress.advance([None, 1.0])
    lines = [line.rsplit(",", 1)[0] for line in stream.getvalue().splitlines()]
    assert lines == ["rollouts: 0/4 done", "rollouts · mean reward 0.500: 2/4 done",
                     "rollouts · mean reward 0.667: 4/4 done"]


def test_piped_progress_is_quiet_between_intervals():
    stream = io.StringIO()
    with RolloutProgress(6, stream=stream, interval_s=3600) as progress:
        progress.advance([1.0, 1.0])
        progress.advance([1.0, 1.0])
        progress.advance([1.0, 1.0])
    assert [line.split(":")[1].split(",")[0] for line in stream.getvalue().splitlines()] == [" 0/6 done", " 6/6 done"]
