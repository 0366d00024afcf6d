"""Collapse recovery through the RL step: the temperature the engine is asked for changes for the
groups started after the intervention (a scripted engine records every request), and the step's
metrics and the log say so."""

import asyncio
import io
import itertools
import json

from tests.fixtures.stores.make_v1_stores import reply
from tests.support.scripted_server import ScriptedServer
from tests.unit.orchestrator.test_zero_filled import FIXTURE_ENV, FakeSampler, step_only

from looprl.config import EnvRuntimeConfig, SamplingParams
from looprl.envs.types import Example
from looprl.gateway.app import Gateway
from looprl.orchestrator.inflight import GroupPool
from looprl.paths import rollout_metrics_path
from looprl.session import RolloutSession
from looprl.utils.logger import reset_logger, setup_logger


def test_raised_temperature_reaches_the_engine(tmp_path):
    # The scripted engine answers each question the same way whatever the temperature: 2+3 right, 9+9
    # wrong, so every group is all-right or all-wrong, a collapse from step 1. The pool runs at lag 0, so
    # it starts each step's two groups alone (one of each): with prefetch, which two of four land first is
    # up to the scheduler, and a step that drew both 2+3 groups looks solved, not stuck (then the
    # recovery decays the temperature, as it should, and the sequence below is another).
    examples = itertools.cycle([Example(id=f"e{a}", payload={"prompt_messages": [
        {"role": "user", "content": f"What is {a} plus {b}?"}], "answer": str(a + b)}) for a, b in [(2, 3), (9, 9)]])
    orch = step_only(tmp_path / "run", sampling={"temperature": 0.5},
                     collapse={"method": "temperature", "raise_by": 0.25, "max_attempts": 2,
                               "escalate": False})
    orch.cfg = orch.cfg.model_copy(update={"max_steps": 7})
    sink = io.StringIO()
    setup_logger("info", sink=sink)
    with ScriptedServer(reply) as server:
        gateway = Gateway(server.base_url, "scripted", SamplingParams(temperature=0.5))
        orch.session = RolloutSession(tmp_path / "run", kind="rl", env=EnvRuntimeConfig(source=FIXTURE_ENV),
                                      gateway=gateway, config={}, splits=["train"])
        version = [0]

        async def run() -> list[int]:
            """Seven steps; the requests the engine had seen after each."""
            seen = []
            async with orch.session as session:
                pool = GroupPool(lambda: session.roll_out(next(examples), "train", 2, sampling=orch.sampling),
                                 lambda: version[0], 2, 0)
                for step in range(1, 8):
                    version[0] = step - 1
                    await orch.step(step, FakeSampler(), pool)
                    seen.append(len(server.requests))
                await pool.cancel()
            return seen

        try:
            counts = asyncio.run(run())
        finally:
            reset_logger()
    temps = [r["temperature"] for r in server.requests]
    # the groups started after step 3's raise are sent at 0.75, after step 4's at 1.0; step 5 gives up
    # (2 raises without signal) and the groups after it go back to 0.5
    assert [t for t, _ in itertools.groupby(temps)] == [0.5, 0.75, 1.0, 0.5]
    assert set(temps[:counts[2]]) == {0.5}  # nothing hotter before the first raise
    metrics = [json.loads(rollout_metrics_path(tmp_path / "run", s).read_text()) for s in range(1, 8)]
    assert [m["collapse/temperature"] for m in metrics] == [0.5, 0.5, 0.75, 1.0, 0.5, 0.5, 0.5]
    assert [k for m in metrics for k in m if k in ("collapse/raise", "collapse/give_up")] == \
        ["collapse/raise", "collapse/raise", "collapse/give_up"]
    # the give-up reads the steps' `reward` metric: the first 3 steps' mean against the 2 after them, level (one
    # question right, one wrong every step): the reward hardly rose
    gave_up = metrics[4]
    assert gave_up["collapse/reward_start"] == sum(m["reward"] for m in metrics[:3]) / 3
    assert gave_up["collapse/reward_recent"] == sum(m["reward"] for m in metrics[3:5]) / 2
    assert gave_up["collapse/recent_steps"] == 2.0
    log = sink.getvalue()
    assert "sampling temperature of the next groups 0.5 -> 0.75 (raise 1)" in log
    assert "collapse recovery gave up" in log and "the reward hardly rose (mean reward" in log
