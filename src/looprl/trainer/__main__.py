"""`python -m looprl.trainer RUN_DIR [--resume-step K] [--weights-region DIR]`: the trainer process, as
`looprl rl` starts it (under torchrun when it has several ranks: every rank runs this).

Reads the run's resolved `config.toml`; imports torch only after parsing, so `--help` is instant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m looprl.trainer", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume-step", type=int, default=0, help="continue after this checkpoint step")
    parser.add_argument("--weights-region", type=Path, help="the run's shared-memory region directory (the launcher "
                        "makes it): broadcasts go through it instead of files")
    args = parser.parse_args()
    from looprl.utils.process import run_process

    def train(cfg) -> None:
        from looprl.trainer.loop import run

        run(cfg, args.run_dir, args.resume_step, args.weights_region)

    return run_process("trainer", args.run_dir, train)


if __name__ == "__main__":
    sys.exit(main())
