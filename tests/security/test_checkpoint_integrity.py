"""Checkpoints: no code runs from a planted `trainer_state.pt` or optimizer metadata (item 8), and nothing
is marked complete before it is on disk (item 12) — issue #34."""

import os
import pickle
import sys
from pathlib import Path

import pytest
import torch
from tests.support.tiny_model import tiny_model, tiny_tokenizer

from looprl.handoff import latest_checkpoint
from looprl.paths import checkpoint_dir, checkpoints_dir, progress_path
from looprl.trainer.broadcast import broadcast_weights
from looprl.trainer.checkpoint import OPTIMIZER_DIR, STATE_FILE, load_trainer_state, save_checkpoint
from looprl.trainer.optim import build_optimizer, build_scheduler


def trainer_parts():
    model = tiny_model()
    optimizer = build_optimizer(model, lr=1e-2)
    return model, optimizer, build_scheduler(optimizer, warmup_steps=3)


class Payload:
    """What an attacker pickles: unpickling it creates `marker` (any code could run instead)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_trainer_state_that_would_run_code_is_refused(tmp_path):
    model, optimizer, scheduler = trainer_parts()
    save_checkpoint(tmp_path, 1, model, tiny_tokenizer(), optimizer, scheduler, progress={"cursor": 4})
    assert load_trainer_state(tmp_path, 1, model, optimizer, scheduler)[0] == {"cursor": 4}  # resume works
    marker = tmp_path / "pwned"
    torch.save({"scheduler": Payload(marker)}, checkpoint_dir(tmp_path, 1) / STATE_FILE)
    with pytest.raises(Exception, match="Weights only load failed"):
        load_trainer_state(tmp_path, 1, model, optimizer, scheduler)
    assert not marker.exists()


def test_optimizer_metadata_that_would_run_code_is_refused(tmp_path):
    model, optimizer, scheduler = trainer_parts()
    save_checkpoint(tmp_path, 1, model, tiny_tokenizer(), optimizer, scheduler)
    marker = tmp_path / "pwned"
    (checkpoint_dir(tmp_path, 1) / OPTIMIZER_DIR / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(pickle.UnpicklingError, match=r"posix\.system has no place"):
        load_trainer_state(tmp_path, 1, model, optimizer, scheduler)
    assert not marker.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names an fd's file through /proc")
def test_every_file_is_fsynced_before_the_checkpoint_is_marked_complete(tmp_path, monkeypatch):
    model, optimizer, scheduler = trainer_parts()
    broadcast = broadcast_weights(tmp_path, 1, model, keep=2)  # the engine resumes from it: synced too
    tmp = checkpoints_dir(tmp_path) / ".step_1.tmp"
    marker = tmp / progress_path(tmp_path, 1).name
    events: list[tuple[str, Path, bool]] = []  # (what, path, whether the marker was written by then)
    real_fsync, real_rename = os.fsync, os.rename

    def record(what: str, path: Path) -> None:
        events.append((what, path, marker.exists() or any(written for *_, written in events)))

    def fsync(fd):
        record("fsync", Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(src, dst):
        record("rename", Path(src))
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    save_checkpoint(tmp_path, 1, model, tiny_tokenizer(), optimizer, scheduler, progress={"cursor": 4})
    assert latest_checkpoint(tmp_path) == 1

    before_marker = {path for what, path, written in events if what == "fsync" and not written}
    final = checkpoint_dir(tmp_path, 1)
    data = [tmp / p.relative_to(final) for p in final.rglob("*") if p.name != marker.name] + [tmp]
    data += [*broadcast.rglob("*"), broadcast]
    assert all(p in before_marker for p in data), sorted(set(data) - before_marker)
    after_marker = [(what, path) for what, path, written in events if written]
    assert after_marker == [("fsync", marker), ("fsync", tmp), ("rename", tmp), ("fsync", checkpoints_dir(tmp_path))]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names an fd's file through /proc")
def test_a_broadcast_removed_while_it_is_synced_does_not_fail_the_checkpoint(tmp_path, monkeypatch):
    """The orchestrator deletes a broadcast once the engine has newer weights, at any moment."""
    import shutil

    model, optimizer, scheduler = trainer_parts()
    broadcast = broadcast_weights(tmp_path, 1, model, keep=2)
    real_fsync = os.fsync

    def fsync(fd):
        real_fsync(fd)
        if Path(os.readlink(f"/proc/self/fd/{fd}")).parent == broadcast:
            shutil.rmtree(broadcast)  # after the first of its files

    monkeypatch.setattr(os, "fsync", fsync)
    save_checkpoint(tmp_path, 1, model, tiny_tokenizer(), optimizer, scheduler, progress={"cursor": 4})
    assert latest_checkpoint(tmp_path) == 1 and not broadcast.exists()
