"""In-place weight updates from a directory of safetensors files (a trainer broadcast or checkpoint).

`load_update(path, model)` reads and checks every tensor before the engine sees it (unknown names
and shape mismatches are the caller's error), so the engine thread only copies tensors into the
existing parameters. Copying in place keeps tied weights tied and needs no model reload. Names a
checkpoint leaves out (e.g. a tied `lm_head.weight`) keep their current values.

The tensors are read into CPU memory and `apply` copies them onto the model's device and dtype (a
GPU engine, a float32 engine fed bfloat16 weights): while earlier requests drain, the waiting update
holds no second copy of the weights in the engine's share of GPU memory.

A directory holding `shared_memory.json` (`looprl.handoff.shared_weights`) names the trainer's region in
`/dev/shm` instead: its tensors are views of the region (mapped once per region and kept), checked the
same way, and `apply` copies straight from them while holding the region's lock, after checking that it
still holds the version named; if not (the trainer is changing it, or has changed it since), `apply` raises
`Superseded` before copying anything, so the model keeps its weights whole. The engine maps the region
read-only.

The server passes its weights directories (`allowed`): a directory, or a region, that does not resolve
inside one of them (symlinks followed) is `OutsideRun`, so a request cannot make the engine read any
file of the node (`looprl.handoff.engine_access`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from looprl.handoff.engine_access import inside
from looprl.handoff.shared_weights import Region, read_message


class WeightsError(ValueError):
    """The directory does not hold weights that fit this model."""


class OutsideRun(WeightsError):
    """The directory (or the shared-memory region it names) is not one this engine may load from."""


@dataclass
class WeightUpdate:
    """Checked tensors from `path`, waiting for the engine to copy them in; `future` resolves once live."""

    path: Path
    tensors: dict[str, torch.Tensor]
    version: int | None = None
    region: Region | None = None
    """The shared-memory region `tensors` are views of, which must hold `region_version` while they are copied."""
    region_version: int = 0
    in_flight: bool = False
    """Applied between two decode steps of the running requests instead of after they finish."""
    future: asyncio.Future[None] = field(init=False)
    loop: asyncio.AbstractEventLoop = field(init=False)

    @torch.no_grad()
    def apply(self, model: Any) -> None:
        with self.region.reading(self.region_version) if self.region is not None else contextlib.nullcontext():
            state = model.state_dict()
            for name, tensor in self.tensors.items():
                state[name].copy_(tensor)


def load_update(path: str | Path, model: Any, version: int | None = None,
                allowed: Sequence[Path] | None = None, in_flight: bool = False) -> WeightUpdate:
    """Read all `*.safetensors` under `path` (or map the shared-memory region it names) and check them
    against `model`'s state dict (`in_flight`: see `WeightUpdate.in_flight`). With `allowed` (the server's
    weights directories), `path` and the region must resolve inside one of them (`OutsideRun` otherwise);
    what is loaded is the resolved path."""
    path = _allowed(path, allowed)
    if not path.is_dir():
        raise WeightsError(f"weights directory {path} does not exist")
    message = read_message(path)
    if message is not None:
        region_path = str(_allowed(message.region, allowed))
        try:
            region = _mapped(region_path, os.stat(region_path).st_ino, message.nbytes)
        except (OSError, ValueError) as e:
            raise WeightsError(f"the shared-memory region of {path} cannot be mapped: {e}") from e
        update = WeightUpdate(path, region.views(message.tensors), version, region, message.version, in_flight)
    else:
        update = WeightUpdate(path, _read_files(path), version, in_flight=in_flight)
    _check(update.tensors, model, path)
    return update


def _allowed(path: str | Path, allowed: Sequence[Path] | None) -> Path:
    if allowed is None:
        return Path(path).expanduser()
    resolved = inside(path, allowed)
    if resolved is None:
        raise OutsideRun(f"{path} is not inside this engine's weights directories "
                         f"({', '.join(map(str, allowed)) or 'none: start it with --weights-dir'})")
    return resolved


@functools.lru_cache(maxsize=2)
def _mapped(path: str, inode: int, nbytes: int) -> Region:
    """The region file at `path` mapped, once per file (`inode`: a region made anew is mapped anew)."""
    return Region(path, nbytes)


def _read_files(path: Path) -> dict[str, torch.Tensor]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise WeightsError(f"no *.safetensors files in {path}")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        tensors.update(load_file(file))
    return tensors


def _check(tensors: dict[str, torch.Tensor], model: Any, path: Path) -> None:
    state = model.state_dict()
    unknown = sorted(set(tensors) - set(state))
    if unknown:
        raise WeightsError(f"{len(unknown)} tensors in {path} are not in the model, e.g. {unknown[:3]}")
    mismatched = [n for n, t in tensors.items() if t.shape != state[n].shape]
    if mismatched:
        name = mismatched[0]
        raise WeightsError(f"shape mismatch for {name}: {tuple(tensors[name].shape)} in {path}, "
                           f"{tuple(state[name].shape)} in the model")
