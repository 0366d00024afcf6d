"""The prompt ledger under SIGKILL: 20 kills (the orchestrator, then the trainer, in turn) at seeded random
moments of one real `looprl rl` run on a tiny random-weight model and 6 examples (3 steps an epoch, one step
of off-policy lag, a checkpoint every 2 steps), each followed by `--resume`; then the run completes.

Prints a row per kill: the victim, when it was killed, the checkpoint the resume went back to, the draws
that resume undid (trained after the checkpoint: retrained; in flight; dropped/skipped after it) and how
many of them the example cursor looprl had before the ledger (the checkpoint's saved position) would have
skipped; then the ledger's coverage per epoch. The ledger's checks (`tests/support/kills.py`) must hold
after every kill and at the end: no example lost or trained twice within an epoch.

    .venv/bin/python bench/ledger_kills.py [--kills 20] [--seed 36] [--max-delay 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.kills import Kill, kill_schedule, run_kills
from tests.support.rl_env import write_data
from tests.unit.inference.conftest import build_tiny_model

from looprl.store.ledger import coverage


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--max-delay", type=float, default=10.0,
                        help="latest kill, seconds after the run's first draw (each cycle's own)")
    args = parser.parse_args()
    kills = kill_schedule(args.kills, args.seed, args.max_delay)
    started = time.monotonic()

    def say(i: int, kill: Kill) -> None:
        print(f"cycle {i + 1}: {kill.victim} {'killed' if kill.killed else 'not killed (run completed)'} after "
              f"{kill.delay_s} s; {kill.steps_stored} steps stored, checkpoint {kill.checkpoint}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        entries = run_kills(Path(tmp), build_tiny_model(Path(tmp) / "tiny"), write_data(Path(tmp) / "data"), kills,
                            say=say)
    print(f"\n{sum(k.killed for k in kills)} kills in {time.monotonic() - started:.0f} s; every check held\n")
    print("| kill | victim | at (s) | resumed from step | undone: trained (retrained) | in flight | other "
          "| pre-ledger cursor would skip |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for i, k in enumerate(kills, 1):
        if not k.killed:
            print(f"| {i} | {k.victim} | {k.delay_s} | (run completed first) | | | | |")
            continue
        other = sum(k.undone.values()) - k.undone["trained"] - k.undone["in_flight"]
        print(f"| {i} | {k.victim.removeprefix('looprl.')} | {k.delay_s} | {k.checkpoint} | {k.undone['trained']} "
              f"| {k.undone['in_flight']} | {other} | {k.cursor_skipped} |")
    print()
    for epoch in coverage(entries):
        print(epoch.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
