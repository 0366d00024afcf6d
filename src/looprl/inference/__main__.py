"""`python -m looprl.inference RUN_DIR --port P [--host H] [--gpus N]`: the run's inference engine as its
`config.toml` says (`inference.backend`, `inference.dtype`, LoRA, vLLM's flags), in the foreground.

What each inference node of a SLURM job runs (`launch.slurm`): vLLM once over the node's GPUs
(`--gpus`, tensor x data parallel), or the embedded engine once per GPU. `looprl rl` on one machine
starts the same engine through `inference.backends.engine_process`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m looprl.inference", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default: 0.0.0.0, other nodes call it)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs vLLM runs on (default: those in CUDA_VISIBLE_DEVICES)")
    args = parser.parse_args(argv)
    from looprl.config import read_run_config
    from looprl.inference.backends import run_engine

    engine = run_engine(read_run_config(args.run_dir), host=args.host, port=args.port, gpus=args.gpus)
    return engine.serve_foreground()


if __name__ == "__main__":
    sys.exit(main())
