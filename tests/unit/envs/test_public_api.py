"""`looprl.envs` is the user contract only: its public names, and no import of the runtime packages."""

import subprocess
import sys

import looprl.envs

CONTRACT = {"BaseEnv", "BaseRollout", "Dataset", "DatasetSplit", "Environment", "Example", "GroupRequest",
            "JsonlDataset", "LogRecordData", "Message", "RolloutFailure", "RolloutResult", "Tool"}


def test_all_is_the_contract():
    assert set(looprl.envs.__all__) == CONTRACT
    assert all(hasattr(looprl.envs, name) for name in looprl.envs.__all__)


def test_sdk_imports_no_runtime_package():
    code = ("import sys, looprl.envs, looprl.envs.logging, looprl.rewards; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('looprl.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    allowed = ("looprl.envs", "looprl.rewards", "looprl.errors")
    assert [m for m in loaded if not m.startswith(allowed)] == []


def test_the_private_modules_contract_lists_every_private_module():
    """pyproject's import-linter contract forbids `looprl.envs._*` outside `looprl.envs` by name (its module
    expressions have no prefix wildcard), so a new `_` module must join the list."""
    import tomllib
    from pathlib import Path

    root = Path(looprl.envs.__file__).parent
    contracts = tomllib.loads((root.parents[2] / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [private] = [c for c in contracts if "looprl.envs.runtime_api" in c["name"]]
    assert sorted(private["forbidden_modules"]) == sorted(f"looprl.envs.{p.stem}" for p in root.glob("_[!_]*.py"))
