"""Run store: what the writer appends, the reader returns, with filters and full-text search."""

import time

import pytest

from looprl.envs.types import LogRecordData, RolloutResult
from looprl.errors import UserError
from looprl.store.reader import RolloutFilter, RunStoreReader
from looprl.store.records import ModelCall, RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter


def make_record(i: int, *, reason: str = "finished", reward: float | None = 1.0, step: int = 0,
                text: str = "hello", logs: int = 1) -> RolloutRecord:
    now = time.time()
    result = RolloutResult(
        rollout_id=f"r{i}", group_id=f"g{i // 2}", example_id=f"e{i // 2}", split="train",
        messages=[{"role": "user", "content": text}], termination_reason=reason,
        error=None if reason == "finished" else "boom", rewards={} if reward is None else {"correct": reward},
        started_at=now, finished_at=now + 1.5,
        logs=[LogRecordData(time=now, level=20 + 10 * (j % 2), level_name="INFO", logger="env", message=f"log {i} {j}")
              for j in range(logs)],
    )
    call = ModelCall(rollout_id=f"r{i}", idx=0, started_at=now, latency_s=0.1, prompt_tokens=5, completion_tokens=3,
                     prompt_token_ids=[1, 2], completion_token_ids=[3], completion_logprobs=[-0.5])
    return RolloutRecord.from_result(result, run_id="run", env_name="env", step=step, reward=reward,
                                     advantage=None, model_calls=[call])


def test_round_trip_and_filters(tmp_path):
    w = RunStoreWriter(tmp_path)
    w.start_run(RunInfo(run_id="run", kind="eval", env="x.py:E", env_name="e", model="m", created_at=time.time()))
    w.write_rollouts([make_record(0), make_record(1, reason="tool_error", reward=None, text="needle here"),
                      make_record(2, reward=0.0, step=1, logs=2)])
    w.write_step("run", 1, {"reward": 0.5})
    w.finish_run("run", "completed", {"n": 3})
    r = RunStoreReader(tmp_path)
    assert r.run().status == "completed"
    rows, total = r.list_rollouts("run")
    assert total == 3 and rows[0].prompt_tokens == 5 and rows[0].log_count == 1
    full = r.rollout("r0")
    assert full.model_calls[0].completion_logprobs == [-0.5] and full.logs[0].message == "log 0 0"
    assert [x.rollout_id for x in r.list_rollouts("run", RolloutFilter(has_error=True))[0]] == ["r1"]
    assert [x.rollout_id for x in r.list_rollouts("run", RolloutFilter(q="needle"))[0]] == ["r1"]
    assert [x.rollout_id for x in r.list_rollouts("run", RolloutFilter(q="log 2 1"))[0]] == ["r2"]
    assert [x.rollout_id for x in r.list_rollouts("run", RolloutFilter(min_log_level=30))[0]] == ["r2"]
    assert [x.rollout_id for x in r.list_rollouts("run", RolloutFilter(step=1))[0]] == ["r2"]
    assert r.list_rollouts("run", RolloutFilter(reward_min=0.5))[1] == 1
    assert [x.rollout_id for x in r.siblings("g0")] == ["r0", "r1"]
    assert r.steps("run") == [{"step": 1, "time": pytest.approx(time.time(), abs=60), "reward": 0.5}]


def test_reader_rejects_non_run_dir(tmp_path):
    with pytest.raises(UserError, match="not a looprl run directory"):
        RunStoreReader(tmp_path)


def test_delete_steps_after_forgets_later_rollouts(tmp_path):
    w = RunStoreWriter(tmp_path)
    w.write_rollouts([make_record(0, step=1), make_record(1, step=2)])
    w.write_step("run", 1, {})
    w.write_step("run", 2, {})
    w.delete_steps_after("run", 1)
    r = RunStoreReader(tmp_path)
    assert [x.rollout_id for x in r.list_rollouts("run")[0]] == ["r0"]
    assert r.logs(rollout_id="r1") == [] and [s["step"] for s in r.steps("run")] == [1]


def test_the_reward_range_leaves_out_later_steps_and_stale_groups(tmp_path):
    from looprl.store.ledger import LedgerEntry

    w = RunStoreWriter(tmp_path)  # groups g0-g3: rewards 0.5, 2.0 (dropped stale), 0.25, -1.0 (step 3)
    w.write_rollouts([make_record(0, reward=0.5, step=1), make_record(2, reward=2.0, step=1),
                      make_record(4, reward=0.25, step=2), make_record(6, reward=-1.0, step=3)])
    w.record_draws("run", [LedgerEntry(group_id=f"g{i}", epoch=1, position=i, example_id=f"e{i}", epoch_size=4,
                                       drawn_at=float(i)) for i in range(4)])
    w.settle_draws("run", [("g0", "trained", 1, None), ("g1", "stale", 1, "old weights"), ("g2", "trained", 2, None)])
    w.close()
    r = RunStoreReader(tmp_path)
    assert r.reward_range("run", "train", up_to_step=2) == (0.25, 0.5)
    assert r.reward_range("run", "eval", up_to_step=2) is None


def test_a_closed_store_leaves_only_its_database_file(tmp_path):
    """Readers during the run and after it (read-only, they cannot delete `-wal`/`-shm`) leave nothing behind."""
    w = RunStoreWriter(tmp_path)
    w.write_rollouts([make_record(0, step=1)])
    during = RunStoreReader(tmp_path)
    assert during.steps("run") == []
    during.close()
    w.write_step("run", 1, {"reward": 1.0})
    w.close()
    after = RunStoreReader(tmp_path)
    assert [s["step"] for s in after.steps("run")] == [1]
    after.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["looprl.db"]
    again = RunStoreWriter(tmp_path)  # a resumed run writes in WAL mode again
    again.write_step("run", 2, {})
    assert again._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["looprl.db"]


def test_trainer_logprobs_land_on_their_calls(tmp_path):
    w = RunStoreWriter(tmp_path)
    records = [make_record(0), make_record(1)]
    first = records[0].model_calls[0]
    records[0].model_calls += [first.model_copy(update={"idx": 1, "status": 500}),
                               first.model_copy(update={"idx": 2, "completion_token_ids": [4, 5],
                                                        "completion_logprobs": [-0.1, -0.2]})]
    w.write_rollouts(records)
    w.write_trainer_logprobs([("r0", 0, [-0.25]), ("r0", 2, [-0.125, -0.5])])
    w.close()
    r = RunStoreReader(tmp_path)
    assert [c.trainer_logprobs for c in r.rollout("r0").model_calls] == [[-0.25], None, [-0.125, -0.5]]
    assert r.rollout("r1").model_calls[0].trainer_logprobs is None
