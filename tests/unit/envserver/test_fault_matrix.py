"""Every env hook x every fault, through real env workers: each cell ends as docs/environments.md promises.

Hooks: `run_tool`, `rollout_context` enter and exit, `compute_reward`, `compute_group_rewards`.
Faults: raise, bad return value, async hang, blocking hang, process kill. Each cell (`test_cell`,
one per hook x fault; `-k "exit and kill"` runs one alone) is a group of three rollouts whose first
(`bad-...`) injects the fault once its siblings and the healthy group beside it (same worker) are
scored; the group hook's fault hits the whole group. A cell checks the termination reason and error,
the failure's record in the rollout's logs, the siblings, the healthy group, and its wall time.

Each hook has an env host with one worker, and its cells run there one after the other (the last
two kill the worker); the hooks run side by side. Timeouts and time bounds scale with the wall time
of a healthy group run just before each cell, so a loaded machine slows the clock, not the verdict.
The last tests pin what rollouts still waiting for `compute_group_rewards` get when their worker
dies: the group hook scores them on a live worker unless it had started (then it is not run again),
and once only.
"""

import asyncio
import textwrap
import time
from dataclasses import dataclass

import pytest
from tests.support.harness import example
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.config import EnvRuntimeConfig
from looprl.envs.types import GroupRequest
from looprl.envserver.host import EnvServerHost
from looprl.session.groups import new_id

pytestmark = pytest.mark.slow  # 25 cells of worker deaths and timeouts: a minute even on an idle machine

MIN_TIMEOUT_S = 2.0
TIMEOUT_PER_BASELINE = 5
"""A cell's timeout: this many times the wall time of the healthy group run just before it, at least
`MIN_TIMEOUT_S`, so that on a loaded machine the healthy rollouts stay well inside it."""
MARGIN_S = 1.5
MARGIN_PER_BASELINE = 3
"""A cell ends within its timeout plus `MARGIN_S` plus this many baselines (model calls and the
siblings it waits for, the watchdog's look, the worker's death)."""

ENV = textwrap.dedent('''
    import asyncio, logging, os, signal, time
    from contextlib import asynccontextmanager
    from looprl.envs import BaseEnv, Dataset

    logger = logging.getLogger("faulty_env")
    TOOLS = [{"type": "function", "function": {"name": "act", "parameters": {"type": "object", "properties": {}}}}]

    scored, done = set(), set()
    """Rollouts scored by compute_reward; rollouts whose last scoring hook has returned."""

    async def inject(hook, fault, args):
        while not (scored.issuperset(args["siblings"]) and done.issuperset(args["companions"])):
            await asyncio.sleep(0.01)
        logger.info("injecting %s into %s", fault, hook)
        if fault == "raise":
            raise RuntimeError(f"injected into {hook}")
        if fault == "block":
            time.sleep(60)
        if fault == "sleep":
            await asyncio.sleep(60)
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

    def cell(rollout_id, example_args, hook):
        if example_args.get("hook") == hook and (rollout_id.startswith("bad-") or hook == "group"):
            return example_args["fault"]
        return None

    class Env(BaseEnv):
        max_turns = 2

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([])

        async def list_tools(self):
            return TOOLS

        async def run_tool(self, rollout_id, tool_name, **args):
            fault = cell(rollout_id, self.args[rollout_id], "run_tool")
            if fault:
                await inject("run_tool", fault, self.args[rollout_id])
                if fault == "bad":
                    return object()
            print(f"tool ran for {rollout_id}")
            return {"ok": True}

        def rollout_context(self, rollout_id, example):
            if cell(rollout_id, example.example_args, "enter") == "bad":
                return object()
            return self._context(rollout_id, example)

        @asynccontextmanager
        async def _context(self, rollout_id, example):
            self.args = getattr(self, "args", {})
            self.args[rollout_id] = example.example_args
            fault = cell(rollout_id, example.example_args, "enter")
            if fault:
                await inject("enter", fault, example.example_args)
            yield
            fault = cell(rollout_id, example.example_args, "exit")
            if fault == "bad":
                yield
            elif fault:
                await inject("exit", fault, example.example_args)

        async def compute_reward(self, rollout):
            fault = cell(rollout.rollout_id, rollout.example_args, "compute_reward")
            if fault:
                await inject("compute_reward", fault, rollout.example_args)
                if fault == "bad":
                    return {"correct": "yes"}
            scored.add(rollout.rollout_id)
            if type(self).compute_group_rewards is BaseEnv.compute_group_rewards:
                done.add(rollout.rollout_id)
            return {"correct": 1.0}

    class GroupEnv(Env):
        async def compute_group_rewards(self, rollouts):
            fault = cell(rollouts[0].rollout_id, rollouts[0].example_args, "group")
            if fault:
                await inject("compute_group_rewards", fault, rollouts[0].example_args)
                if fault == "bad":
                    return [1.0]
            logger.info("ranking %d rollouts on pid %d", len(rollouts), os.getpid())
            done.update(r.rollout_id for r in rollouts)
            return {r.rollout_id: {"rank": 1.0} for r in rollouts}

    class ScoringKillsEnv(GroupEnv):
        """Its group hook kills a worker that did not run the group's compute_reward (one scoring them again)."""

        async def compute_group_rewards(self, rollouts):
            if not scored.issuperset(r.rollout_id for r in rollouts):
                logger.info("killing the worker that scores them again")
                os.kill(os.getpid(), signal.SIGKILL)
            return await super().compute_group_rewards(rollouts)
''')

HOOKS = ("run_tool", "enter", "exit", "compute_reward", "group")
FAULTS = ("raise", "bad", "sleep", "block", "kill")
"""In the order a hook's cells run on its worker: the worker is killed by the last two."""
RAISED = {"run_tool": ("tool_error", "injected into run_tool"), "enter": ("env_error", "injected into enter"),
          "exit": ("env_error", "injected into exit"),
          "compute_reward": ("reward_error", "injected into compute_reward"),
          "group": ("group_reward_error", "injected into compute_group_rewards")}
BAD = {"run_tool": ("tool_error", "returned a object, which is neither a str nor JSON-serialisable"),
       "enter": ("env_error", "rollout_context raised on enter"), "exit": ("env_error", "generator didn't stop"),
       "compute_reward": ("reward_error", "components must be numbers"),
       "group": ("group_reward_error", "must return {rollout_id: dict}, got list")}


def expected(hook: str, fault: str) -> tuple[str, str]:
    """(termination reason, text in the error) of the faulty rollout(s) of a cell."""
    if fault == "raise":
        return RAISED[hook]
    if fault == "bad":
        return BAD[hook]
    if fault == "block":
        return "timeout", "in blocking code"
    if fault == "sleep":
        return "timeout", "timeout"
    if hook == "exit":  # killed inside its rollout_context exit: like every fault there, it fails the rollout
        return "env_worker_died", "inside this rollout's rollout_context exit"
    return "env_worker_died", "SIGKILL"


def reply(body) -> Reply:
    done = any(m["role"] == "tool" for m in body["messages"])
    return Reply("done") if done else Reply("", tool_calls=[("act", {})])


def group(server, timeout_s: float, hook: str = "", fault: str | None = None,
          companions: list[str] = ()) -> GroupRequest:
    tag = new_id()
    ids = [f"bad-{tag}-0", f"ok-{tag}-1", f"ok-{tag}-2"]
    args = {"hook": hook, "fault": fault, "siblings": ids[1:] if hook != "group" else [],
            "companions": list(companions)} if fault else {}
    return GroupRequest(group_id=new_id(), example=example("go", **args), split="train", rollout_ids=ids,
                        model="scripted", base_url_template=server.base_url, timeout_s=timeout_s)


async def timed(host: EnvServerHost, request: GroupRequest):
    start = time.monotonic()
    results = await host.submit_group(request)
    return results, time.monotonic() - start


@dataclass
class Outcome:
    """One cell's run: the faulty group, the healthy group beside it, the cell's wall time and its bound."""

    rollouts: list
    healthy: list
    elapsed: float
    bound: float


async def run_hook(host: EnvServerHost, server: ScriptedServer, hook: str, faults: list[str]) -> dict[str, Outcome]:
    """Run `hook`'s cells one after the other on the host's single worker.

    Before each cell two healthy groups run unclocked: the first waits out a respawned worker, the
    second measures the baseline that the cell's timeout and bound scale with. The healthy group beside the cell is
    submitted right after it (same worker), and the fault waits for it to be scored."""
    out = {}
    for fault in faults:
        await timed(host, group(server, 60.0))  # waits out a respawned worker, whose first calls are slow
        _, baseline = await timed(host, group(server, 60.0))
        timeout_s = max(MIN_TIMEOUT_S, TIMEOUT_PER_BASELINE * baseline)
        healthy = group(server, timeout_s)
        cell = group(server, timeout_s, hook, fault, companions=healthy.rollout_ids)
        (rollouts, elapsed), (beside, _) = await asyncio.gather(timed(host, cell), timed(host, healthy))
        out[fault] = Outcome(rollouts, beside, elapsed, timeout_s + MARGIN_S + MARGIN_PER_BASELINE * baseline)
    return out


def selected_cells(session: pytest.Session) -> dict[str, list[str]]:
    """The faults selected (e.g. with -k) for each hook, in `FAULTS` order."""
    chosen = {(item.callspec.params["hook"], item.callspec.params["fault"]) for item in session.items
              if item.module is not None and item.module.__name__ == __name__
              and getattr(item, "originalname", None) == "test_cell"}
    return {hook: [f for f in FAULTS if (hook, f) in chosen] for hook in HOOKS if any(h == hook for h, _ in chosen)}


async def run_matrix(tmp_path, cells: dict[str, list[str]]) -> dict[tuple[str, str], Outcome]:
    env_file = tmp_path / "faulty_env.py"
    env_file.write_text(ENV)
    hosts = {hook: EnvServerHost(EnvRuntimeConfig(source=f"{env_file}:{'GroupEnv' if hook == 'group' else 'Env'}",
                                                  timeout_grace_s=1.0), tmp_path / hook, splits=["train"])
             for hook in cells}
    await asyncio.gather(*(h.start() for h in hosts.values()))
    try:
        with ScriptedServer(reply) as server:
            runs = await asyncio.gather(*(run_hook(hosts[hook], server, hook, faults)
                                          for hook, faults in cells.items()))
    finally:
        await asyncio.gather(*(h.aclose() for h in hosts.values()))
    return {(hook, fault): outcome for hook, run in zip(cells, runs) for fault, outcome in run.items()}


@pytest.fixture(scope="module")
def matrix(request, tmp_path_factory) -> dict[tuple[str, str], Outcome]:
    """Every selected cell, run once for the module: one env host (one worker) per hook, hooks side by side."""
    return asyncio.run(run_matrix(tmp_path_factory.mktemp("fault_matrix"), selected_cells(request.session)))


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("hook", HOOKS)
def test_cell(matrix, hook: str, fault: str):
    outcome = matrix[hook, fault]
    problems = check_cell(hook, fault, outcome)
    reasons = [r.termination_reason for r in outcome.healthy]
    if reasons != ["finished"] * 3 or not all(r.rewards.get("correct") == 1.0 for r in outcome.healthy):
        problems.append(f"the healthy group beside it: {reasons} {[r.error for r in outcome.healthy]}")
    assert not problems, "\n".join(problems)


def check_cell(hook: str, fault: str, outcome: Outcome) -> list[str]:
    reason, text = expected(hook, fault)
    rollouts = outcome.rollouts
    faulty = rollouts if hook == "group" else rollouts[:1]
    siblings = [] if hook == "group" else rollouts[1:]
    problems = []
    if outcome.elapsed > outcome.bound:
        problems.append(f"took {outcome.elapsed:.1f} s, more than its timeout and margin ({outcome.bound:.1f} s)")
    for r in faulty:
        if r.termination_reason != reason or text not in (r.error or ""):
            problems.append(f"ended {r.termination_reason} ({(r.error or '')[:300]!r}), expected {reason} ({text!r})")
        records = [rec for rec in r.logs if rec.logger == "looprl.failure"]
        if (not any(f"injecting {fault} into" in rec.message for rec in r.logs) and fault != "bad") or not records:
            problems.append(f"logs lack the fault's records: {[(rec.logger, rec.message) for rec in r.logs]}")
        if fault in ("block", "sleep") and not any("in inject" in (rec.exception or "") for rec in records):
            problems.append(f"no stuck stack in the failure record: {[rec.exception for rec in records]}")
    for r in siblings:
        if r.termination_reason != "finished" or r.rewards != {"correct": 1.0} or len(r.messages) != 4:
            problems.append(f"a sibling ended {r.termination_reason} {r.rewards} ({r.error!r})")
        if hook != "enter" and not any(rec.logger == "stdout" and rec.message.startswith("tool ran") for rec in r.logs):
            problems.append(f"a sibling's print is not in its logs: {[rec.message for rec in r.logs]}")
    return problems


async def run_group_env(tmp_path, env_class: str, timeout_s: float, hook: str, fault: str):
    """One faulty group of `env_class` on a host with one worker; its results and the env server's log."""
    env_file = tmp_path / "faulty_env.py"
    env_file.write_text(ENV)
    host = EnvServerHost(EnvRuntimeConfig(source=f"{env_file}:{env_class}", timeout_grace_s=1.0), tmp_path / "run",
                         splits=["train"])
    await host.start()
    try:
        with ScriptedServer(reply) as server:
            results = await host.submit_group(group(server, timeout_s, hook, fault))
    finally:
        await host.aclose()
    return results, (tmp_path / f"run/logs/envs/train/{env_class}/env_server.log").read_text()


def check_scored_elsewhere(siblings) -> None:
    """Siblings that waited for the group hook when their worker died, scored by it on a live worker."""
    for r in siblings:
        assert (r.termination_reason, r.rewards, len(r.messages)) == ("finished", {"correct": 1.0, "rank": 1.0}, 4)
        messages = [(rec.logger, rec.message) for rec in r.logs]
        assert any(name == "stdout" and m.startswith("tool ran") for name, m in messages), messages
        [notice] = [rec for rec in r.logs if rec.logger == "looprl.failure"]
        assert "before compute_group_rewards started: it ran on a live env worker" in notice.message
        # the group hook's records, from the live worker, come after the notice and name these two rollouts
        assert messages.index((notice.logger, notice.message)) < next(
            i for i, (_, m) in enumerate(messages) if m.startswith("ranking 2 rollouts"))


@pytest.mark.parametrize("fault", ["kill", "block"])
async def test_siblings_waiting_for_the_group_hook_are_scored_on_a_live_worker(tmp_path, fault):
    """docs/environments.md, "a worker's death with a `compute_group_rewards` hook": a member killed or
    blocked its worker before the group hook started; the others get it, without the failed member, from a
    fresh worker."""
    (bad, *siblings), _ = await run_group_env(tmp_path, "GroupEnv", 60.0 if fault == "kill" else 5.0,
                                              "compute_reward", fault)
    if fault == "kill":
        assert bad.termination_reason == "env_worker_died" and "SIGKILL" in bad.error
    else:
        assert bad.termination_reason == "timeout" and "in blocking code" in bad.error
    assert bad.rewards == {} and bad.logs[-1].logger == "looprl.failure"
    check_scored_elsewhere(siblings)


async def test_a_group_hook_that_kills_its_worker_is_not_run_again(tmp_path):
    results, server_log = await run_group_env(tmp_path, "GroupEnv", 60.0, "group", "kill")
    for r in results:
        assert (r.termination_reason, r.rewards, len(r.messages)) == ("env_worker_died", {}, 4)
        assert r.error.startswith("compute_group_rewards was running when env worker 0 died (killed by SIGKILL)")
        assert "it is not run again" in r.error
        assert sum(rec.message == "injecting kill into compute_group_rewards" for rec in r.logs) == 1
        assert r.logs[-1].logger == "looprl.failure" and "it is not run again" in r.logs[-1].message
    assert server_log.count("respawning worker") == 1 and "scoring them on a live worker" not in server_log


async def test_a_worker_that_dies_scoring_waiting_rollouts_ends_them_once(tmp_path):
    (bad, *siblings), server_log = await run_group_env(tmp_path, "ScoringKillsEnv", 60.0, "compute_reward", "kill")
    assert bad.termination_reason == "env_worker_died"
    for r in siblings:
        assert (r.termination_reason, r.rewards, len(r.messages)) == ("env_worker_died", {}, 4)
        assert r.error.startswith("compute_group_rewards was running when env worker 0 died (killed by SIGKILL)")
        messages = [rec.message for rec in r.logs]
        assert any("it ran on a live env worker" in m for m in messages), messages
        assert "killing the worker that scores them again" in messages
    assert server_log.count("respawning worker") == 2
