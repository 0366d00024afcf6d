"""Supervision: a failing child is reported (and the caller stops the rest); clean exits finish the watch."""

import sys

from looprl.launch.supervisor import Child, stop_all, tail, watch


def child(tmp_path, name, code):
    return Child(name, tmp_path / f"{name}.log").start([sys.executable, "-c", code])


def test_a_failing_child_is_reported_and_the_others_stop(tmp_path):
    sleeper = child(tmp_path, "engine", "import time; time.sleep(60)")
    worker = child(tmp_path, "trainer", "print('boom'); raise SystemExit(3)")
    failed = watch([sleeper, worker], until_done=[worker])
    stop_all([sleeper, worker])
    assert failed is worker and worker.process.returncode == 3
    assert sleeper.process.returncode is not None and "boom" in tail(worker.log_path)


def test_the_watch_ends_when_the_awaited_children_exit_cleanly(tmp_path):
    sleeper = child(tmp_path, "engine", "import time; time.sleep(60)")
    done = [child(tmp_path, "orchestrator", "pass"), child(tmp_path, "trainer", "pass")]
    assert watch([sleeper, *done], until_done=done) is None
    stop_all([sleeper, *done])


def test_a_service_that_exits_early_counts_as_failed(tmp_path):
    service = child(tmp_path, "engine", "pass")
    worker = child(tmp_path, "trainer", "import time; time.sleep(60)")
    assert watch([service, worker], until_done=[worker]) is service
    stop_all([service, worker])
