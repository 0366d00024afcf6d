"""The orchestrator's prompt ledger: draws recorded before their groups start, each step's outcomes
(trained, skipped, filtered, stale, failed), the failure policies, and where a resume goes on from."""

import asyncio
import io

import pytest
from tests.unit.orchestrator.test_zero_filled import FakePool, FakeSampler, result, step_only

from looprl.envs.types import Example
from looprl.handoff import TrainBatch, read_model
from looprl.orchestrator.example_order import ExampleOrder
from looprl.orchestrator.failure_streak import TooManyFailures
from looprl.orchestrator.ledger import PromptLedger, resume_order
from looprl.paths import batch_path
from looprl.store.ledger import LedgerEntry
from looprl.store.reader import RunStoreReader
from looprl.store.records import ModelCall
from looprl.utils.logger import reset_logger, setup_logger

EXAMPLES = [Example(id=f"e{i}", payload={"prompt_messages": [{"role": "user", "content": "hi"}]}) for i in range(4)]


def entry(position: int, outcome: str, step: int | None, undone_at: int | None = None, epoch: int = 1) -> LedgerEntry:
    return LedgerEntry(group_id=f"g{epoch}{position}", epoch=epoch, position=position, example_id="x", epoch_size=4,
                       drawn_at=0.0, outcome=outcome, step=step, undone_at=undone_at)


def test_a_resume_draws_what_was_in_flight_or_undone_and_passes_over_what_settled():
    straight = ExampleOrder(EXAMPLES, seed=7)
    expected = [straight.draw() for _ in range(6)]
    entries = [entry(0, "trained", 1), entry(1, "in_flight", None, undone_at=1), entry(2, "stale", 1),
               entry(3, "trained", 2, undone_at=1)]
    order = resume_order(EXAMPLES, 7, entries, sampler={"epoch": 1, "position": 0})  # the old cursor: ignored
    draws = [order.draw() for _ in range(3)]
    assert [(d.epoch, d.position) for d in draws] == [(0, 1), (0, 3), (1, 0)]
    assert [d.example for d in draws] == [expected[1].example, expected[3].example, expected[4].example]


def test_a_resume_after_a_whole_epoch_goes_on_with_the_next_and_without_a_ledger_at_the_saved_position():
    order = resume_order(EXAMPLES, 7, [entry(p, "trained", 1) for p in range(4)], sampler=None)
    assert (order.draw().epoch, order.state()) == (1, {"epoch": 1, "position": 1})
    old = resume_order(EXAMPLES, 7, [], sampler={"epoch": 0, "position": 3})
    assert (old.draw().position, old.draw().epoch) == (3, 1)


def rollout(rid: str, rewards: dict[str, float] | None, group: str):
    """A rollout with one trainable model call (so a group with signal trains)."""
    call = ModelCall(rollout_id=rid, idx=0, started_at=0.0, latency_s=0.1, prompt_token_ids=[1, 2],
                     completion_token_ids=[3], completion_logprobs=[-0.5])
    return result(rid, rewards, group), [call]


def _ledger_rows(tmp_path) -> dict[str, LedgerEntry]:
    reader = RunStoreReader(tmp_path)
    try:
        return {e.group_id: e for e in reader.ledger("run")}
    finally:
        reader.close()


def _draw_groups(orch, n: int) -> list[str]:
    """Draw `n` examples through the orchestrator's ledger; their group ids."""
    return [asyncio.run(orch.ledger.draw())[1] for _ in range(n)]


def test_a_step_settles_its_groups_in_the_ledger(tmp_path):
    orch = step_only(tmp_path)
    g1, g2, g3 = _draw_groups(orch, 3)
    assert {e.outcome for e in _ledger_rows(tmp_path).values()} == {"in_flight"}
    fresh = [[rollout("a", {"c": 1.0}, g1), rollout("b", {"c": 0.0}, g1)],
             [rollout("c", {"c": 1.0}, g2), rollout("d", {"c": 1.0}, g2)]]
    stale = [[(result("e", {"c": 1.0}, g3), []), (result("f", {"c": 0.0}, g3), [])]]
    asyncio.run(orch.step(1, FakeSampler(), FakePool(fresh, stale)))
    asyncio.run(orch.ledger.cancel("the run ended"))
    orch.session.writer.close()
    rows = _ledger_rows(tmp_path)
    assert [(rows[g].outcome, rows[g].step) for g in (g1, g2, g3)] == [("trained", 1), ("skipped", 1), ("stale", 1)]
    assert rows[g2].reason == "no signal" and "behind step 1" in rows[g3].reason
    assert [(e.epoch, e.position) for e in rows.values()] == [(1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize("policy", ["train_rest", "drop"])
def test_a_group_with_a_failed_rollout_trains_the_rest_or_is_dropped(tmp_path, policy):
    orch = step_only(tmp_path, failed_group=policy)
    [g1] = _draw_groups(orch, 1)
    group = [rollout("a", {"c": 1.0}, g1), rollout("b", {"c": 0.0}, g1), rollout("x", None, g1)]
    asyncio.run(orch.step(1, FakeSampler(), FakePool([group], [])))
    orch.session.writer.close()
    row = _ledger_rows(tmp_path)[g1]
    advantages = {r.rollout_id: r.advantage for r in RunStoreReader(tmp_path).list_rollouts("run")[0]}
    if policy == "drop":
        assert (row.outcome, row.reason) == ("failed", "1 of 3 rollouts failed: timeout")
        assert set(advantages.values()) == {None}
    else:
        assert row.outcome == "trained" and advantages["a"] > 0 > advantages["b"] and advantages["x"] is None


def test_a_group_whose_rollouts_all_failed_is_failed_not_skipped(tmp_path):
    orch = step_only(tmp_path)
    [g1] = _draw_groups(orch, 1)
    asyncio.run(orch.step(1, FakeSampler(), FakePool([[(result("x", None, g1), []), (result("y", None, g1), [])]],
                                                      [])))
    orch.session.writer.close()
    assert _ledger_rows(tmp_path)[g1].outcome == "failed"


def test_mask_truncated_trains_the_finished_replies_and_says_when_a_step_trained_nothing(tmp_path):
    """`orchestrator.mask_truncated`: a reply cut off at `max_tokens` beside a finished one is stored without an
    advantage while its reward stays in the baseline; a group in which no reply finished trains as usual; a group
    whose only finished reply scored the mean trains nothing, its ledger row says why and the step warns, once."""
    orch = step_only(tmp_path, mask_truncated=True)
    g1, g2 = _draw_groups(orch, 2)

    def cut(rid: str, reward: float, group: str):
        r, calls = rollout(rid, {"c": reward}, group)
        return r.model_copy(update={"termination_reason": "output_exceeded"}), calls

    fresh = [[rollout("a", {"c": 1.0}, g1), cut("b", 0.0, g1), rollout("c", {"c": 0.0}, g1)],
             [cut("d", 1.0, g2), cut("e", 0.0, g2)]]
    sink, at_mean = io.StringIO(), []
    setup_logger("info", sink=sink)
    try:
        asyncio.run(orch.step(1, FakeSampler(), FakePool(fresh, [])))
        for step in (2, 3):  # the signal only in replies cut off, the finished one at the mean: said once
            g3 = _draw_groups(orch, 1)[0]
            at_mean.append(g3)
            group = [rollout(f"h{step}", {"c": 0.5}, g3), cut(f"f{step}", 1.0, g3), cut(f"g{step}", 0.0, g3)]
            asyncio.run(orch.step(step, FakeSampler(), FakePool([group], [])))
    finally:
        reset_logger()
    asyncio.run(orch.ledger.cancel("the run ended"))
    orch.session.writer.close()
    [line] = [line for line in sink.getvalue().splitlines() if "trained nothing" in line]
    assert "WARNING" in line
    assert "step 2 trained nothing: its 2 replies with a learning signal were cut off" in line
    rows = _ledger_rows(tmp_path)
    advantages = {r.rollout_id: r.advantage for r in RunStoreReader(tmp_path).list_rollouts("run")[0]}
    assert advantages["a"] > 0 > advantages["c"] and advantages["a"] > -advantages["c"]  # b's 0 is in the mean
    assert advantages["b"] is None and advantages["d"] > 0 > advantages["e"]  # no reply of g2 finished
    assert rows[g1].outcome == rows[g2].outcome == "trained" and orch.pending[1]["rollouts_masked"] == 1
    assert {(rows[g].outcome, rows[g].reason) for g in at_mean} == {(
        "skipped", "every reply with a learning signal was cut off by a length limit (orchestrator.mask_truncated)")}
    assert orch.pending[2]["groups_skipped"] == 1  # a group left without signal by the mask counts as skipped


def test_a_step_trains_its_groups_in_draw_order_whichever_finished_first(tmp_path):
    """Two runs of one seed hand the trainer the same batch: the groups in the order their examples were drawn (the
    pool gives them in the order they finished), and the step forgets the draws of the groups it took."""
    orch = step_only(tmp_path)
    g1, g2, g3 = _draw_groups(orch, 3)
    orch.draws = {g1: (0, 0), g2: (0, 1), g3: (0, 2)}
    groups = {g: [rollout(f"{g}-a", {"c": 1.0}, g), rollout(f"{g}-b", {"c": 0.0}, g)] for g in (g1, g2, g3)}
    asyncio.run(orch.step(1, FakeSampler(), FakePool([groups[g3], groups[g1], groups[g2]], [])))
    orch.session.writer.close()
    batch = read_model(batch_path(tmp_path, 1), TrainBatch)
    trained = [rid for mb in batch.micro_batches for tree in mb.trees for rid in tree.rollout_ids]
    assert trained == [f"{g}-{x}" for g in (g1, g2, g3) for x in "ab"] and orch.draws == {}


def test_include_failed_and_dropping_failed_groups_contradict():
    with pytest.raises(ValueError, match="choose one"):
        step_only(None, include_failed=True, failed_group="drop")


def test_consecutive_failures_stop_the_run_naming_them_and_where_their_errors_are(tmp_path):
    orch = step_only(tmp_path, max_consecutive_failures=3)
    g1, g2 = _draw_groups(orch, 2)
    ok = [(result("a", {"c": 1.0}, g1), []), (result("b", None, g1), [])]
    failing = [(result("x", None, g2).model_copy(update={"error": "Traceback ...\nOSError: sandbox down",
                                                         "finished_at": 2.0}), []),
               (result("y", None, g2).model_copy(update={"finished_at": 3.0}), [])]
    asyncio.run(orch.step(1, FakeSampler(), FakePool([ok], [])))  # 1 failure after a success: goes on
    with pytest.raises(TooManyFailures) as caught:
        asyncio.run(orch.step(2, FakeSampler(), FakePool([failing], [])))
    orch.session.writer.close()
    message = str(caught.value)
    assert "3 rollouts in a row failed" in message
    assert "y (train, example e) timeout: no error text; x (train, example e) timeout: OSError: sandbox down" in message
    assert f"looprl logs {tmp_path} --rollout y" in message and "logs/envs/train/toy" in message
    assert {r.rollout_id for r in RunStoreReader(tmp_path).list_rollouts("run")[0]} == {"a", "b", "x", "y"}
    assert _ledger_rows(tmp_path)[g2].outcome == "failed"


def test_draws_being_stored_when_their_group_is_cancelled_are_cancelled_too(tmp_path):
    orch = step_only(tmp_path)

    async def scenario() -> None:
        task = asyncio.ensure_future(orch.ledger.draw())
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await orch.ledger.cancel("stopped")

    asyncio.run(scenario())
    orch.session.writer.close()
    assert [e.outcome for e in _ledger_rows(tmp_path).values()] == ["cancelled"]


def test_prompt_ledger_draws_in_order(tmp_path):
    orch = step_only(tmp_path)
    assert isinstance(orch.ledger, PromptLedger)
    _draw_groups(orch, 5)
    orch.session.writer.close()
    assert [(e.epoch, e.position) for e in _ledger_rows(tmp_path).values()] == [(1, 0), (1, 1), (1, 2), (1, 3),
                                                                               (2, 0)]
