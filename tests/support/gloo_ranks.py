"""Run a function on several trainer ranks on the CPU: one spawned process each, joined in a gloo group through
`parallel.setup` as torchrun's ranks are (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, the master's address)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp


def run_ranks(fn: Callable[..., None], *args: Any, world_size: int = 2) -> None:
    """`fn(rank, *args)` in `world_size` processes (a module-level function: the processes import it); raises
    if any rank fails."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank, args=(port, world_size, fn, args), nprocs=world_size)


def _rank(rank: int, port: int, world_size: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
    import torch

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world_size))
    torch.set_num_threads(1)
    fn(rank, *args)
