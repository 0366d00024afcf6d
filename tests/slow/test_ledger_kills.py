"""The prompt ledger survives SIGKILLs: the orchestrator, then the trainer, killed at seeded random moments
of one real `looprl rl` run (a tiny random-weight model, 6 examples), each time resumed; at the end every
example of every finished epoch was trained exactly once or is named as skipped, filtered, dropped stale or
failed, every draw a resume undid was redone, and the store's trained groups are the ledger's
(`tests/support/kills.py`; `bench/ledger_kills.py` runs 20 kills and prints the table)."""

import pytest
from tests.integration.test_rl_cli import looprl
from tests.support.kills import kill_schedule, run_kills
from tests.support.rl_env import write_data
from tests.unit.inference.conftest import build_tiny_model

from looprl.store.ledger import coverage


@pytest.mark.slow
def test_kills_then_resumes_lose_and_repeat_no_example(tmp_path):
    kills = kill_schedule(3, seed=36, max_delay_s=3)
    entries = run_kills(tmp_path, build_tiny_model(tmp_path / "tiny"), write_data(tmp_path / "data"), kills)
    assert sum(k.killed for k in kills) >= 2, kills
    epochs = coverage(entries)
    assert len(epochs) >= 2 and all(c.repeated == 0 for c in epochs)
    assert any(e.undone_at is not None for e in entries)  # the kills did undo draws, and they were redone
    lines = looprl("metrics", str(tmp_path / "run")).stdout.splitlines()
    assert [line for line in lines if line.startswith("epoch ")] == [c.line() for c in epochs]
    assert epochs[0].line().startswith("epoch 1: ") and "/6 examples trained" in epochs[0].line()
