"""Serves `import benchmax...` from looprl's compatibility layer when no real benchmax is importable.

`install()` appends a finder to `sys.meta_path`, after every regular one, so an installed benchmax
always wins. Only when the regular finders find no `benchmax` does the finder answer: it registers
every module of `looprl.interop.benchmax.compat` under the matching `benchmax.` name at once, so
`benchmax.envs.base.BaseEnv is compat.envs.base.BaseEnv` and no submodule is ever loaded twice.
`used()` says whether that happened, so the loader can say so in the run's log.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import pkgutil
import sys
from types import ModuleType

from looprl.interop.benchmax import compat

_PACKAGE = "benchmax"


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        for info in pkgutil.walk_packages(compat.__path__, compat.__name__ + "."):
            sys.modules[_PACKAGE + info.name[len(compat.__name__):]] = importlib.import_module(info.name)
        return compat

    def exec_module(self, module: ModuleType) -> None:
        """Every module ran when `create_module` imported it."""


class CompatFinder(importlib.abc.MetaPathFinder):
    served = False

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _PACKAGE:
            return None
        CompatFinder.served = True
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(), is_package=True)


def install() -> None:
    """Put the finder last on `sys.meta_path` (once)."""
    if not any(isinstance(f, CompatFinder) for f in sys.meta_path):
        sys.meta_path.append(CompatFinder())


def used() -> bool:
    """Whether an `import benchmax` in this process was served by the compatibility layer."""
    return CompatFinder.served
