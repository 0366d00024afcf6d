"""`python -m looprl.orchestrator RUN_DIR --engine-url URL [URL ...] [--resume-step K]`: the orchestrator process.

`looprl rl` starts it after the inference engine is healthy; it reads the run's resolved
`config.toml` and is the only writer of the run store. Several engine URLs (a SLURM job's inference
nodes) get the rollouts spread over them and every weight update. Every request to an engine carries
the run secret (`$LOOPRL_RUN_SECRET`, taken out of the environment at start, so the env servers it
starts do not inherit it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m looprl.orchestrator", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--engine-url", required=True, nargs="+",
                        help="the root URL (http://HOST:PORT) of each inference engine serving the policy")
    parser.add_argument("--model-name", help="the name the engine serves (default: model.name)")
    parser.add_argument("--resume-step", type=int, default=0, help="continue after this checkpoint step")
    args = parser.parse_args()
    from looprl.handoff.engine_access import take_run_secret
    from looprl.utils.process import run_process

    secret = take_run_secret()  # before any env server starts: user code never sees it

    def orchestrate(cfg) -> None:
        from looprl.orchestrator.loop import Orchestrator

        orchestrator = Orchestrator(cfg, args.run_dir, args.engine_url, args.model_name or cfg.model.name, secret)
        asyncio.run(orchestrator.run(args.resume_step))

    return run_process("orchestrator", args.run_dir, orchestrate)


if __name__ == "__main__":
    sys.exit(main())
