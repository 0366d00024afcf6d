"""SIGKILL a process of a real `looprl rl` run at random moments, resume, and check the prompt ledger.

Shared by `tests/slow/test_ledger_kills.py` (a few kills) and `bench/ledger_kills.py` (20 kills and
the table for docs/benchmarks.md). One run directory goes through every kill: each cycle starts
`looprl rl` (with `--resume` after the first), waits until the victim process runs and then a seeded
random delay, SIGKILLs it (the launcher then stops the rest), and checks the ledger. Each cycle runs to
`step_budget` steps past the latest checkpoint (one that completes first is not a kill). At the end the
run completes and
`check_ledger(final=True)` must hold: every example of every finished epoch trained exactly once or
named (skipped, filtered, dropped stale, failed), every undone draw redone, and the store agreeing.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.rl_env import write_rl_config

from looprl.handoff import latest_checkpoint
from looprl.paths import progress_path
from looprl.store.ledger import SETTLED, LedgerEntry, coverage, live
from looprl.store.reader import RunStoreReader

ROOT = Path(__file__).resolve().parents[2]
VICTIMS = ("looprl.orchestrator", "looprl.trainer")
"""SIGKILLed in turn: the orchestrator, then the trainer."""


def children(pid: int) -> list[int]:
    """Every descendant of `pid` alive now (a short-lived child may exit while it is walked)."""
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            kids = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for child in kids:
            found += [int(child), *children(int(child))]
    return found


def find_process(launcher: int, marker: str) -> int | None:
    """The descendant of `launcher` whose command line holds `marker`."""
    for pid in children(launcher):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                return pid
        except OSError:
            continue
    return None


def write_config(tmp: Path, model: Path, data: Path, run: Path) -> Path:
    """A tiny, fast run: 6 examples, 2 groups of 4 per step (3 steps an epoch), one step of off-policy
    lag (groups carry across steps, so some are in flight at every checkpoint), a checkpoint every 2 steps
    (so a resume often undoes a trained step)."""
    return write_rl_config(tmp / "kills.toml", model=model, data=data, run=run, max_steps=12, overrides={
        "orchestrator": {"max_off_policy_steps": 1, "eval": {"interval": 0, "num_examples": 0}},
        "trainer": {"checkpoint": {"interval": 2, "resume_every_s": 100000, "keep": 1}}})


@dataclass
class Kill:
    """One cycle: what was killed when, and what the resume after it undid."""

    victim: str
    delay_s: float
    killed: bool = False
    """False when the run completed before the moment came."""
    steps_stored: int = 0
    checkpoint: int = 0
    """The step the next run resumed from."""
    old_cursor: tuple[int, int] | None = None
    """The checkpoint's saved example position (epoch 0-based, position): where the cursor looprl had before
    the ledger would have gone on."""
    undone: Counter[str] = field(default_factory=Counter)
    """Outcomes of the draws the resume undid."""
    cursor_skipped: int = 0
    """Undone draws before the old cursor: examples the pre-ledger resume would have skipped."""
    started_at: float = 0.0
    ended_at: float = float("inf")


def ledger(run: Path) -> list[LedgerEntry]:
    reader = RunStoreReader(run)
    try:
        return reader.ledger(reader.run().run_id)
    finally:
        reader.close()


def run_cycle(args: list[str], kill: Kill, run: Path) -> None:
    """Start `looprl rl ARGS`, SIGKILL `kill.victim` `kill.delay_s` after the run's first draw (so the moments
    fall while it trains, not in the start-up); return when the launcher has exited. Fails if the launcher
    neither completes nor dies of the kill."""
    kill.started_at = time.time()
    launcher = subprocess.Popen([sys.executable, "-m", "looprl.cli", "rl", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    pid = None
    while (pid is None or not drawn_since(run, kill.started_at)) and launcher.poll() is None \
            and time.monotonic() < deadline:
        pid = pid or find_process(launcher.pid, kill.victim)
        time.sleep(0.1)
    moment = time.monotonic() + kill.delay_s
    while launcher.poll() is None and time.monotonic() < moment:
        time.sleep(0.05)
    if launcher.poll() is None and pid is not None:
        os.kill(pid, signal.SIGKILL)
        kill.killed = True
    _, err = launcher.communicate(timeout=600)
    kill.ended_at = time.time()
    if kill.killed and launcher.returncode == 0:  # the victim had done its part: the run completed first
        kill.killed = False
    expected = 1 if kill.killed else 0
    if launcher.returncode != expected:
        raise AssertionError(f"looprl rl exited {launcher.returncode} (expected {expected}):\n{err[-4000:]}")
    if (run / "looprl.db").exists():  # a kill during start-up may come before the orchestrator made it
        with closing(sqlite3.connect(f"file:{run / 'looprl.db'}?mode=ro", uri=True)) as db:
            kill.steps_stored = db.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    kill.checkpoint = latest_checkpoint(run) or 0
    if kill.checkpoint:
        sampler = json.loads(progress_path(run, kill.checkpoint).read_text()).get("sampler") or {}
        kill.old_cursor = (sampler.get("epoch", 0), sampler.get("position", 0))


def record_undone(kill: Kill, entries: list[LedgerEntry]) -> None:
    """After the resume: what it undid, and how much of it the pre-ledger cursor would have skipped."""
    undone = [e for e in entries if e.undone_at == kill.checkpoint and kill.started_at < e.drawn_at < kill.ended_at]
    kill.undone = Counter(e.outcome for e in undone)
    if kill.old_cursor is not None:
        kill.cursor_skipped = sum((e.epoch - 1, e.position) < kill.old_cursor for e in undone)


def drawn_since(run: Path, since: float) -> bool:
    """Whether the run drew an example after `since` (its orchestrator is past start-up, rolling out)."""
    if not (run / "looprl.db").exists():
        return False
    with closing(sqlite3.connect(f"file:{run / 'looprl.db'}?mode=ro", uri=True)) as db:
        try:
            return (db.execute("SELECT MAX(drawn_at) FROM ledger").fetchone()[0] or 0) > since
        except sqlite3.OperationalError:  # the tables are not made yet
            return False


def has_ledger(run: Path) -> bool:
    """Whether the run got far enough to resume (its store has a run): a kill in start-up may leave none."""
    if not (run / "looprl.db").exists():
        return False
    with closing(sqlite3.connect(f"file:{run / 'looprl.db'}?mode=ro", uri=True)) as db:
        try:
            return db.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] > 0
        except sqlite3.OperationalError:  # the tables are not made yet
            return False


def check_ledger(run: Path, final: bool) -> list[LedgerEntry]:
    """The ledger's promises, against the store. `final`: the run completed, so every epoch it began up to
    the last one is whole, and nothing is in flight. Otherwise (just after a kill) the store is compared
    up to the latest checkpoint only: the killed step may have stored its rollouts and not its outcomes,
    which the resume undoes anyway."""
    entries = ledger(run)
    assert entries, "no ledger rows"
    current = live(entries)
    by_position: dict[tuple[int, int], list[LedgerEntry]] = {}
    for e in entries:
        by_position.setdefault((e.epoch, e.position), []).append(e)
        assert {d.example_id for d in by_position[(e.epoch, e.position)]} == {e.example_id}, (e, "order changed")
    for cov in coverage(entries):
        assert cov.repeated == 0, cov.line()
    for draws in by_position.values():
        settled = [d for d in live(draws) if d.outcome in SETTLED]
        assert len(settled) <= 1, draws
        for d in draws:
            if d.undone_at is not None:
                assert d.step is None or d.step > d.undone_at, d
    # the store's trained groups are exactly the ledger's, step by step; undone draws left no rollouts
    with closing(sqlite3.connect(run / "looprl.db")) as db:
        trained = set(db.execute("SELECT DISTINCT group_id, step FROM rollouts WHERE split='train' "
                                 "AND advantage IS NOT NULL"))
        stored_groups = {g for (g,) in db.execute("SELECT DISTINCT group_id FROM rollouts WHERE split='train'")}
    upto = float("inf") if final else latest_checkpoint(run) or 0
    assert {t for t in trained if t[1] <= upto} == {(e.group_id, e.step) for e in current
                                                   if e.outcome == "trained" and e.step <= upto}
    assert not stored_groups & {e.group_id for e in entries if e.undone_at is not None}
    if final:
        last = max(e.epoch for e in entries)
        size = entries[0].epoch_size
        for epoch in range(1, last):
            for position in range(size):
                draws = live(by_position.get((epoch, position), []))
                assert [d.outcome in SETTLED for d in draws] == [True], (epoch, position, draws)
        assert not [e for e in current if e.outcome == "in_flight"]
    return entries


def kill_schedule(kills: int, seed: int, max_delay_s: float) -> list[Kill]:
    """`kills` cycles, victims in turn (the orchestrator first), each at a seeded random moment in
    [0, max_delay_s] seconds after its run's first draw."""
    rng = random.Random(seed)
    return [Kill(VICTIMS[i % 2], round(rng.uniform(0.0, max_delay_s), 1)) for i in range(kills)]


def run_kills(tmp: Path, model: Path, data: Path, kills: list[Kill], step_budget: int = 30,
              say: Callable[[int, Kill], None] | None = None) -> list[LedgerEntry]:
    """Every cycle of `kills` on one run directory, then a run to completion; the final entries."""
    run = tmp / "run"
    cfg = write_config(tmp, model, data, run)
    max_steps = step_budget
    for i, kill in enumerate(kills):
        resume = has_ledger(run)
        max_steps = (latest_checkpoint(run) or 0) + step_budget  # each cycle has steps left to kill in
        run_cycle(["@", str(cfg), "--max_steps", str(max_steps)] + (["--resume"] if resume else []), kill, run)
        if has_ledger(run):
            check_ledger(run, final=not kill.killed)
        if say is not None:
            say(i, kill)
    run_cycle(["@", str(cfg), "--max_steps", str(max_steps), "--resume"], Kill("none", 0.0), run)
    entries = check_ledger(run, final=True)
    for kill in kills:
        if kill.killed:
            record_undone(kill, entries)
    return entries
