"""Env workers under load: 1,000 concurrent rollouts with 10 log records each, nothing lost.

Runs `--groups` groups of `--group-size` rollouts at once through an `EnvServerHost` (env worker
processes) against a scripted local OpenAI-compatible server, twice: with 10 records per rollout
(5 `logging` records, 5 `print` lines) and with none. Checks that every rollout came back
`finished` with all its records, and prints wall time, rollouts/s, the capture overhead and the
peak RSS of the host process and of each env worker.

    .venv/bin/python bench/env_load.py [--groups 125] [--group-size 8] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.harness import example
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.config import EnvRuntimeConfig
from looprl.envs.types import GroupRequest
from looprl.envserver.host import EnvServerHost
from looprl.session.groups import new_id

ENV = textwrap.dedent('''
    import asyncio, logging
    from looprl.envs import BaseEnv, Dataset

    logger = logging.getLogger("load_env")

    class LoadEnv(BaseEnv):
        max_turns = 1

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([])

        async def compute_reward(self, rollout):
            for i in range(rollout.example_args["records"] // 2):
                logger.info("record %d of %s", i, rollout.rollout_id)
                print(f"print {i} of {rollout.rollout_id}")
                await asyncio.sleep(0)
            return {"correct": 1.0}
''')


def peak_rss_mib(pid: int | None = None) -> float:
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(spec: str, run_dir: Path, groups: int, size: int, workers: int, records: int) -> float:
    host = EnvServerHost(EnvRuntimeConfig(source=spec, workers=workers), run_dir, splits=["train"])
    await host.start()
    try:
        with ScriptedServer(lambda body: Reply("ok")) as server:
            requests = [GroupRequest(group_id=new_id(), example=example(f"p{i}", records=records), split="train",
                                     rollout_ids=[new_id() for _ in range(size)], model="scripted",
                                     base_url_template=server.base_url, timeout_s=600)
                        for i in range(groups)]
            start = time.perf_counter()
            results = [r for g in await asyncio.gather(*(host.submit_group(q) for q in requests)) for r in g]
            elapsed = time.perf_counter() - start
        slots = host.servers["train"]._slots
        worker_rss = [peak_rss_mib(s.proc.pid) for s in slots if s.proc is not None]
    finally:
        await host.aclose()
    ok = sum(r.termination_reason == "finished" for r in results)
    kept = sum(sum(rec.logger in ("load_env", "stdout") for rec in r.logs) for r in results)
    lost = len(results) * records - kept
    print(f"records/rollout={records:2d}  rollouts={len(results)} finished={ok}  records={kept} lost={lost}  "
          f"{elapsed:.2f} s  {len(results) / elapsed:.0f} rollouts/s  host RSS {peak_rss_mib():.0f} MiB  "
          f"worker RSS {', '.join(f'{m:.0f}' for m in worker_rss)} MiB")
    if ok != len(results) or lost:
        raise SystemExit("rollouts or records were lost")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=125)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "load_env.py"
        path.write_text(ENV)
        spec = f"{path}:LoadEnv"
        bare = asyncio.run(run(spec, Path(tmp) / "bare", args.groups, args.group_size, args.workers, 0))
        logged = asyncio.run(run(spec, Path(tmp) / "logged", args.groups, args.group_size, args.workers, 10))
    print(f"capture overhead: {100 * (logged / bare - 1):+.0f} % wall time with 10 records per rollout")


if __name__ == "__main__":
    main()
