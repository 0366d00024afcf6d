"""The shared-memory weight handoff: the trainer's servable weights in one file in `/dev/shm` that the
embedded engine on the same host copies from, so no safetensors file is written or parsed per step.

    {region dir}/weights.bin   bytes 0..7: the weights version it holds (int64), -1 while the trainer
                               changes them; from byte 64: every tensor at its (64-byte aligned) offset,
                               in the broadcast dtype: exactly the tensors `model.safetensors` would hold
    broadcasts/step_N/shared_memory.json + STABLE
                               `SharedWeights`: the region file, the version and the layout; the
                               orchestrator relays it like a file broadcast (`POST /update_weights`)

Who changes the bytes holds an exclusive `flock` on the region file, and sets the version to -1 first and
to N last; a reader holds a shared `flock` while it copies and loads only if it gets the lock at once and
the version it finds is the one it was asked for (`Region.reading`). So a half-written region is never
loaded, the trainer never changes weights an engine is copying, and the engine never waits for the
trainer. The lock protocol replaces double buffering: the trainer waits only if it changes the weights
again while an engine still copies the previous ones (with off-policy overlap).

The launcher makes the region directory (`/dev/shm/looprl-weights-*`, one per `looprl rl`) and removes
it when the run ends, however it ends; a directory whose launcher died without a word (SIGKILL) is
swept by the next `looprl rl` (`launch.weight_region`). Plain Python (`fcntl`, `mmap`); torch only in
`Region.views`, for the two processes that turn the bytes into tensors.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from looprl.handoff.files import read_model, write_model

if TYPE_CHECKING:
    import torch

REGION_ROOT = Path("/dev/shm")
REGION_PREFIX = "looprl-weights-"
REGION_FILE = "weights.bin"
MESSAGE_FILE = "shared_memory.json"
HEADER_BYTES = 64
ALIGN = 64
CHANGING = -1
_VERSION = struct.Struct("<q")


class TensorEntry(BaseModel):
    name: str
    dtype: str
    """torch's name of the dtype (`float32`, `bfloat16`, ...)."""
    shape: list[int]
    offset: int
    nbytes: int


class SharedWeights(BaseModel):
    """`broadcasts/step_N/shared_memory.json`: produced by the trainer once version N is in the region;
    consumed by the engine (`inference.weight_update`), which the orchestrator asks to load it."""

    region: str
    """The region file (`/dev/shm/looprl-weights-*/weights.bin`)."""
    version: int
    nbytes: int
    tensors: list[TensorEntry]


def layout(tensors: Iterable[tuple[str, str, list[int], int]]) -> tuple[list[TensorEntry], int]:
    """Offsets for `(name, dtype, shape, nbytes)` tensors one after another, each aligned (so any dtype
    can be viewed in place), after the header; and the region's size."""
    entries, offset = [], HEADER_BYTES
    for name, dtype, shape, nbytes in tensors:
        entries.append(TensorEntry(name=name, dtype=dtype, shape=shape, offset=offset, nbytes=nbytes))
        offset += -(-nbytes // ALIGN) * ALIGN
    return entries, offset


def write_message(directory: Path, message: SharedWeights) -> None:
    write_model(Path(directory) / MESSAGE_FILE, message)


def read_message(directory: Path) -> SharedWeights | None:
    """The shared-memory message of a broadcast directory; None for a broadcast of files."""
    return read_model(Path(directory) / MESSAGE_FILE, SharedWeights)


class Region:
    """One process's mapping of a region file (`create` allocates it: the trainer, which maps it read-write;
    a reader, the engine, opens and maps it read-only). Mapped once with its page tables filled
    (`MAP_POPULATE`): the mapping is kept for the run, and a copy through a fresh mapping of 0.5 GB paid
    ~130k page faults, most of the copy's time."""

    def __init__(self, path: str | Path, nbytes: int, create: bool = False) -> None:
        self.path, self.nbytes, self.writable = Path(path), nbytes, create
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT if create else os.O_RDONLY, 0o600)
        try:
            if create:
                os.posix_fallocate(self._fd, 0, nbytes)  # ENOSPC now, not SIGBUS on a later write
                os.pwrite(self._fd, _VERSION.pack(CHANGING), 0)
            elif os.fstat(self._fd).st_size < nbytes:
                raise ValueError(f"{self.path} holds {os.fstat(self._fd).st_size} bytes, fewer than {nbytes}")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if create else 0)
            self._map = mmap.mmap(self._fd, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=prot)
        except BaseException:
            os.close(self._fd)
            raise
        self._exclusive = False

    @property
    def inode(self) -> int:
        return os.fstat(self._fd).st_ino

    @property
    def version(self) -> int:
        return int(_VERSION.unpack_from(self._map, 0)[0])

    def views(self, entries: Iterable[TensorEntry]) -> dict[str, torch.Tensor]:
        """The tensors of `entries`, in place in the mapping (writing one writes the region; a reader's
        are read-only, and writing one faults)."""
        import torch

        with warnings.catch_warnings():  # a reader's mapping is read-only on purpose: torch warns about it
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            whole = torch.frombuffer(self._map, dtype=torch.uint8)
        return {e.name: whole[e.offset:e.offset + e.nbytes].view(getattr(torch, e.dtype)).view(e.shape)
                for e in entries}

    def begin_change(self) -> None:
        """Lock the region for writing (waiting for readers to finish) and mark it changing; idempotent."""
        if not self._exclusive:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._exclusive = True
        _VERSION.pack_into(self._map, 0, CHANGING)

    def publish(self, version: int) -> None:
        """Mark the region as holding `version` and unlock it: call once every byte is written."""
        self.begin_change()
        _VERSION.pack_into(self._map, 0, version)
        self._exclusive = False
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def reading(self, version: int) -> Iterator[None]:
        """Hold the region unchanged while the body copies from it; `Superseded` (nothing is read) unless it
        holds exactly `version`, complete. Never waits: a reader (the engine's one thread, which also
        decodes) does not stall while the trainer changes the weights; it is told to load the next ones."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Superseded(version, CHANGING) from None
        try:
            found = self.version
            if found != version:
                raise Superseded(version, found)
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


class Superseded(Exception):
    """The region no longer holds the version asked for: the trainer has changed it since (or is changing it)."""

    def __init__(self, wanted: int, found: int) -> None:
        state = "weights being changed" if found == CHANGING else f"version {found}"
        super().__init__(f"the shared-memory region holds {state}, not version {wanted}")
        self.wanted, self.found = wanted, found

