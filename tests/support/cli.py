"""Running the `looprl` command as a user does, from the repository root, in this test's interpreter."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def looprl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "looprl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc
