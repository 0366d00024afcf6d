"""The RL step with dynamic sampling: groups without signal are filtered out of the batch (stored,
not trained) and counted; without it they are skipped, whatever the loss; the collapse metric and warning."""

import asyncio
import io
import json

import pytest
from tests.unit.orchestrator.test_prompt_ledger import rollout
from tests.unit.orchestrator.test_zero_filled import FakePool, FakeSampler, result, step_only

from looprl.paths import rollout_metrics_path
from looprl.store.reader import RunStoreReader
from looprl.utils.logger import reset_logger, setup_logger


def _groups():
    signal = [(result("a", {"correct": 1.0}, "g1"), []), (result("b", {"correct": 0.0}, "g1"), [])]
    alike = [(result("c", {"correct": 1.0}, "g2"), []), (result("d", {"correct": 1.0}, "g2"), [])]
    return [signal, alike]


def test_dynamic_sampling_keeps_groups_with_signal_and_stores_the_rest(tmp_path):
    orch = step_only(tmp_path, dynamic_sampling={"max_extra_groups": 3})
    pool = FakePool(_groups(), [])
    asyncio.run(orch.step(1, FakeSampler(), pool))
    orch.session.writer.close()
    assert pool.max_extra == 3
    metrics = json.loads(rollout_metrics_path(tmp_path, 1).read_text())
    assert (metrics["groups_sampled"], metrics["groups_kept"], metrics["groups_skipped"]) == (2, 1, 1)
    assert metrics["no_signal_frac"] == 0.5
    rows = {r.rollout_id: r.advantage for r in RunStoreReader(tmp_path).list_rollouts("run")[0]}
    assert rows["c"] is None and rows["d"] is None and rows["a"] > 0 > rows["b"]


def test_without_dynamic_sampling_nothing_is_filtered(tmp_path):
    pool = FakePool(_groups(), [])
    orch = step_only(tmp_path)
    asyncio.run(orch.step(1, FakeSampler(), pool))
    orch.session.writer.close()
    assert pool.max_extra == 0
    metrics = json.loads(rollout_metrics_path(tmp_path, 1).read_text())
    assert (metrics["groups_sampled"], metrics["groups_kept"], metrics["groups_skipped"]) == (2, 1, 1)


def test_steps_without_signal_warn_that_the_policy_stopped_exploring(tmp_path):
    def alike(step: int, group: int):
        return [(result(f"r{step}{group}{i}", {"correct": 1.0}, f"g{group}"), []) for i in range(2)]

    orch = step_only(tmp_path)
    sink = io.StringIO()
    setup_logger("info", sink=sink)
    try:
        for step in (1, 2, 3):
            asyncio.run(orch.step(step, FakeSampler(), FakePool([alike(step, 0), alike(step, 1)], [])))
    finally:
        reset_logger()
        orch.session.writer.close()
    [line] = [line for line in sink.getvalue().splitlines() if "stopped exploring" in line]
    assert "WARNING" in line and "steps 1-3" in line and "/runs/run/rollouts/r300" in line


@pytest.mark.parametrize("loss", [{"entropy_coef": 0.01}, {"kl_coef": 0.05}])
def test_groups_without_signal_stay_out_of_the_batch_whatever_the_loss(tmp_path, loss):
    """An entropy bonus or a KL term does not bring a group without signal into the batch: trained at advantage 0,
    a step of such groups only is AdamW's full-size step along the bonus alone (tried on large_number: the reply's
    entropy rose from 1 to 7 nats a token while its first word stayed "No"; docs/benchmarks.md)."""
    orch = step_only(tmp_path)
    orch.cfg.trainer.loss = orch.cfg.trainer.loss.model_copy(update=loss)
    g1, g2 = (asyncio.run(orch.ledger.draw())[1] for _ in range(2))
    fresh = [[rollout("a", {"c": 1.0}, g1), rollout("b", {"c": 0.0}, g1)],
             [rollout("c", {"c": 1.0}, g2), rollout("d", {"c": 1.0}, g2)]]
    asyncio.run(orch.step(1, FakeSampler(), FakePool(fresh, [])))
    orch.session.writer.close()
    metrics = json.loads(rollout_metrics_path(tmp_path, 1).read_text())
    assert (metrics["groups_kept"], metrics["groups_skipped"], metrics["samples"]) == (1, 1, 2)
    reader = RunStoreReader(tmp_path)
    rows = {r.rollout_id: r.advantage for r in reader.list_rollouts("run")[0]}
    outcomes = {e.group_id: (e.outcome, e.reason) for e in reader.ledger("run")}
    reader.close()
    assert rows["c"] is rows["d"] is None and outcomes[g2] == ("skipped", "no signal")
