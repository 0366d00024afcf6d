"""Checking `torch.distributed.checkpoint`'s metadata files before `dcp.load` unpickles them.

DCP writes the optimizer's `.metadata` with `pickle` and reads it back with `pickle.load`, which runs
whatever a planted file tells it to. `check_metadata` first unpickles each metadata file with an
unpickler that resolves only what DCP writes there: the classes of its metadata module, its file
storage record, `torch.Size`, dtypes, layouts and paths. Anything else (`os.system`, `builtins.eval`, a
dotted name reaching through a module) raises `pickle.UnpicklingError` before the file is loaded.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

_CLASS_MODULES = {"torch.distributed.checkpoint.metadata"}
"""Modules whose own classes (dataclasses, enums) may appear: nothing else in them."""
_NAMES = {("torch.distributed.checkpoint.filesystem", "_StorageInfo"), ("torch", "Size"),
          ("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath")}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # decided on the names before anything is imported: importing a module can run code too
        if "." not in name and ((module, name) in _NAMES or module == "torch" or module in _CLASS_MODULES):
            found = super().find_class(module, name)
            if ((module, name) in _NAMES or isinstance(found, torch.dtype)
                    or (isinstance(found, type) and found.__module__ == module and module in _CLASS_MODULES)):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} has no place in a checkpoint's metadata")


def check_metadata(directory: Path) -> None:
    """Raise `pickle.UnpicklingError` if a DCP metadata file in `directory` names anything DCP does not write."""
    for file in sorted(Path(directory).glob("*.metadata")):
        with open(file, "rb") as f:
            _MetadataUnpickler(f).load()
