"""Zero-filled components are stored with each rollout when its batch is scored: by the RL step (the
step's batch; dropped groups are in none) and by `looprl eval` (the whole split, once all are in)."""

import asyncio
import json
from pathlib import Path
from typing import ClassVar

from tests.fixtures.stores.make_v1_stores import QUESTIONS, reply
from tests.support.scripted_server import ScriptedServer

from looprl.commands.eval.run import EvalRunConfig, run_eval
from looprl.config import EnvRuntimeConfig, RLConfig
from looprl.envs.types import Example, RolloutResult
from looprl.orchestrator.example_order import ExampleOrder
from looprl.orchestrator.failure_streak import FailureStreak
from looprl.orchestrator.inflight import Collected, Landed
from looprl.orchestrator.ledger import PromptLedger
from looprl.orchestrator.loop import Orchestrator
from looprl.session import RolloutSession
from looprl.session.collapse import ExplorationWatch
from looprl.session.collapse_recovery import CollapseRecovery
from looprl.session.rewards import UnusedWeights, mark_zero_filled
from looprl.store.reader import RunStoreReader
from looprl.store.records import RolloutRecord
from looprl.store.writer import RunStoreWriter

FIXTURE_ENV = str(Path(__file__).resolve().parents[2] / "fixtures/stores/fixture_env.py") + ":FixtureEnv"


def result(rid: str, rewards: dict[str, float] | None, group: str = "g") -> RolloutResult:
    return RolloutResult(rollout_id=rid, group_id=group, example_id="e", split="train",
                         messages=[{"role": "user", "content": "hi"}],
                         termination_reason="finished" if rewards is not None else "timeout",
                         rewards=rewards or {}, started_at=0.0, finished_at=1.0)


def test_mark_zero_filled_over_a_batch():
    batch = [RolloutRecord.from_result(r, run_id="run", env_name="e", step=1, reward=None, advantage=None,
                                       model_calls=[])
             for r in [result("a", {"x": 1.0, "y": 1.0}), result("b", {"y": 0.0}), result("c", None)]]
    mark_zero_filled(batch)
    assert [r.zero_filled for r in batch] == [[], ["x"], []]


class FakeWeights:
    version = 0
    published_at: ClassVar[dict[int, float]] = {}
    loaded_at: ClassVar[dict[int, float]] = {}

    async def wait_for(self, version: int) -> None:
        pass

    async def sync(self) -> None:
        pass


class FakePool:
    """Hands the step these groups; with a `keep` predicate (dynamic sampling) the fresh ones it
    rejects come back as filtered."""

    def __init__(self, fresh, stale):
        self.fresh, self.stale = fresh, stale
        self.max_extra: int | None = None
        self.floor = 0

    async def collect(self, step, prefetch, before_top_up, keep=None, max_extra=0):
        self.max_extra = max_extra
        kept = [g for g in self.fresh if keep is None or keep(g)]
        return Collected([Landed(g, 0) for g in kept], [Landed(g, 0) for g in self.stale],
                         [Landed(g, 0) for g in self.fresh if g not in kept])


class FakeSampler:
    def state(self) -> dict:
        return {}


def step_only(tmp_path: Path, **orchestrator) -> Orchestrator:
    """An orchestrator that can run `step` only: no engine, env server or gateway."""
    orch = Orchestrator.__new__(Orchestrator)
    orch.cfg = RLConfig(env={"source": "x.py:E"}, max_steps=2,
                        orchestrator={"batch_size": 4, "group_size": 2, "max_off_policy_steps": 1,
                                      "eval": {"interval": 0}, **orchestrator})
    orch.run_dir, orch.pending, orch.loss_calls, orch.draws, orch.warned_all_masked = tmp_path, {}, {}, {}, False
    orch.unused_weights = UnusedWeights({})
    orch.session = RolloutSession.__new__(RolloutSession)  # records and writes only
    orch.session.run_id, orch.session.env_name, orch.session.reward_weights = "run", "toy", {}
    orch.weights, orch.session.writer = FakeWeights(), RunStoreWriter(tmp_path)
    orch.exploration = ExplorationWatch()
    orch.failures = FailureStreak(orch.cfg.orchestrator.max_consecutive_failures)
    examples = [Example(id=f"e{i}", payload={"prompt_messages": [{"role": "user", "content": "hi"}]}) for i in range(4)]
    orch.ledger = PromptLedger(orch.session.writer, "run", ExampleOrder(examples, seed=0))
    ocfg = orch.cfg.orchestrator
    orch.recovery = CollapseRecovery(ocfg.collapse, ocfg.base_temperature) if ocfg.collapse else None
    return orch


def test_rl_step_stores_the_batch_zero_fill(tmp_path):
    orch = step_only(tmp_path)
    fresh = [[(result("a", {"correct": 1.0, "format": 1.0}, "g1"), []), (result("b", {"correct": 0.0}, "g1"), [])],
             [(result("c", None, "g2"), []), (result("d", {"correct": 1.0, "format": 0.5}, "g2"), [])]]
    stale = [[(result("e", {"correct": 1.0}, "g3"), []), (result("f", {"correct": 0.0, "format": 1.0}, "g3"), [])]]
    asyncio.run(orch.step(1, FakeSampler(), FakePool(fresh, stale)))
    orch.session.writer.close()
    rows = {r.rollout_id: r.zero_filled for r in RunStoreReader(tmp_path).list_rollouts("run")[0]}
    assert rows == {"a": [], "b": ["format"], "c": [], "d": [], "e": [], "f": []}


def test_eval_stores_the_split_zero_fill(tmp_path):
    (tmp_path / "eval.jsonl").write_text("".join(
        json.dumps({"prompt_messages": [{"role": "user", "content": f"What is {a} plus {b}?"}], "answer": str(a + b)})
        + "\n" for a, b in QUESTIONS))
    with ScriptedServer(reply) as server:
        cfg = EvalRunConfig(env=EnvRuntimeConfig(source=FIXTURE_ENV, base_dir=tmp_path), num_examples=4,
                         rollouts_per_example=2, model="scripted", base_url=server.base_url, output=tmp_path / "run")
        asyncio.run(run_eval(cfg))
    rows = RunStoreReader(tmp_path / "run").list_rollouts("run")[0]
    marks = {(tuple(sorted(r.rewards)), r.termination_reason): r.zero_filled for r in rows}
    assert marks == {(("bonus", "correct"), "finished"): [], (("correct",), "finished"): ["bonus"],
                     ((), "model_error"): []}
