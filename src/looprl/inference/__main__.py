"""`python -m looprl.inference RUN_DIR --port P [--host H] [--gpus N]`: the run's inference engine as its
`config.toml` says (`inference.backend`, `inference.dtype`, LoRA, vLLM's flags), in the foreground.
It loads weights only from the run's `broadcasts/`, and requires the run secret (`$LOOPRL_RUN_SECRET`,
which the SLURM script exports from `{output_dir}/run_secret`) when it has one; without one it serves
only on loopback. A SLURM job binds each engine to its node's address (`--host $SLURMD_NODENAME`).

What each inference node of a SLURM job runs (`launch.slurm`): vLLM once over the node's GPUs
(`--gpus`, tensor x data parallel), or the embedded engine once per GPU. `looprl rl` on one machine
starts the same engine through `inference.backends.engine_process`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m looprl.inference", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default: 127.0.0.1; another address needs $LOOPRL_RUN_SECRET, the run "
                             "secret, which every request but /health must then carry)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs vLLM runs on (default: those in CUDA_VISIBLE_DEVICES)")
    args = parser.parse_args(argv)
    from looprl.config import read_run_config
    from looprl.errors import UserError
    from looprl.handoff.engine_access import SECRET_ENV, check_engine_bind
    from looprl.inference.backends import run_engine
    from looprl.paths import broadcasts_dir

    secret = os.environ.get(SECRET_ENV)
    try:
        check_engine_bind(args.host, secret)
    except UserError as e:
        print(f"python -m looprl.inference: {e}", file=sys.stderr)
        return 2
    engine = run_engine(read_run_config(args.run_dir), host=args.host, port=args.port, gpus=args.gpus, secret=secret,
                        weights_dirs=[broadcasts_dir(args.run_dir)])
    return engine.serve_foreground()


if __name__ == "__main__":
    sys.exit(main())
