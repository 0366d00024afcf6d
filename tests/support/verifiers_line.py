"""Which verifiers line this venv has. The two cannot share a venv (0.4 pins openai<3 and mcp==2.0.0): the
default `.venv` has the 0.4 line (`verifiers.v1` envs), `make venv312` the classic 0.3 API."""

from __future__ import annotations

from types import ModuleType

import pytest


def _line() -> tuple[int, int] | None:
    try:
        from looprl.interop.verifiers import installed_line

        return installed_line()
    except Exception:
        return None


def require_classic() -> ModuleType:
    """`verifiers` with its classic `load_environment` API (0.3.x), else the calling test module is skipped."""
    line = _line()
    if line is None or line >= (0, 4):
        pytest.skip("needs verifiers 0.3.x (the classic API; `make venv312` has it)", allow_module_level=True)
    import verifiers

    return verifiers


def require_v1() -> ModuleType:
    """`verifiers.v1` of verifiers >= 0.4, else the calling test module is skipped."""
    line = _line()
    if line is None or line < (0, 4):
        pytest.skip("needs verifiers >= 0.4 (`pip install -e '.[dev]'` has it)", allow_module_level=True)
    import verifiers.v1

    return verifiers.v1
