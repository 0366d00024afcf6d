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
