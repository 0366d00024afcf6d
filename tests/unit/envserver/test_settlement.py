"""What a dead worker's rollouts get (`looprl.envserver.settlement`), from the server's state alone.

The `rollout_context` exit rule: a fault inside the exit fails that rollout whatever it had scored. A
raise or an async hang there fails it in the worker (`BaseEnv`; `tests/unit/envs/test_loop.py`); a
blocking hang or the worker's death is settled here. The fault matrix (`test_fault_matrix.py`) runs
every one of them through real workers.
"""

import asyncio
import logging

from tests.support.harness import example

from looprl.envs.types import GroupRequest, RolloutResult
from looprl.envserver.protocol import RolloutSettled
from looprl.envserver.settlement import salvage
from looprl.envserver.worker_slot import PendingRequest

ERROR = "env worker 0 died (killed by SIGKILL) while the rollout ran; see env_worker_0.log"
IDS = ["exiting", "exited", "waiting-for-exit", "unsettled"]


def request() -> GroupRequest:
    return GroupRequest(group_id="g", example=example("go"), split="train", rollout_ids=IDS, model="m",
                        base_url_template="http://x/{rollout_id}/v1", timeout_s=5.0)


def scored(rid: str) -> RolloutResult:
    return RolloutResult(rollout_id=rid, group_id="g", example_id="e", split="train",
                         messages=[{"role": "user", "content": "go"}, {"role": "assistant", "content": "4"}],
                         termination_reason="finished", rewards={"correct": 1.0}, started_at=0.0, finished_at=1.0)


async def pending() -> PendingRequest:
    """A group whose first three rollouts were scored: one inside its exit, one exited, one before its exit."""
    p = PendingRequest(asyncio.get_running_loop().create_future(), request())
    p.settled = {rid: RolloutSettled(id="g", result=scored(rid)) for rid in IDS[:3]}
    p.exiting, p.exited = {"exiting"}, {"exited"}
    return p


async def test_a_death_inside_the_exit_fails_that_rollout_and_only_it():
    results, waiting = salvage(await pending(), request(), {}, ERROR)
    by_id = {r.rollout_id: r for r in results}
    assert waiting == [] and list(by_id) == IDS
    dead = by_id["exiting"]
    assert (dead.termination_reason, dead.rewards, len(dead.messages)) == ("env_worker_died", {}, 2)
    assert dead.error == f"{ERROR}, inside this rollout's rollout_context exit"
    assert dead.logs[-1].logger == "looprl.failure" and dead.logs[-1].level == logging.ERROR
    for rid, when in (("exited", "had exited"), ("waiting-for-exit", "never exited")):
        kept = by_id[rid]
        assert (kept.termination_reason, kept.rewards, kept.error) == ("finished", {"correct": 1.0}, None)
        assert kept.logs[-1].level == logging.WARNING and when in kept.logs[-1].message
    assert by_id["unsettled"].termination_reason == "env_worker_died" and by_id["unsettled"].rewards == {}


async def test_a_blocking_hang_inside_the_exit_is_a_timeout():
    stuck = "rollout exceeded its 5.0 s timeout in blocking code: ... Stuck at:\n  File env.py, in exit"
    results, _ = salvage(await pending(), request(), {"exiting": stuck}, ERROR)
    dead = results[0]
    assert (dead.termination_reason, dead.rewards, dead.error) == ("timeout", {}, stuck)
    assert "in exit" in (dead.logs[-1].exception or "")
