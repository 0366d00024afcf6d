"""Every inspector script parses as the ES module the pages load it as.

A syntax error in one script blanks the whole page it belongs to, and only the browser tests (slow, and
skipped without Chromium) would notice; `node --check` finds it in milliseconds. Skipped without Node.js.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

import looprl.inspector

SCRIPTS = sorted((Path(looprl.inspector.__file__).parent / "static" / "js").glob("*.js"))


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_parses_as_a_module(script: Path, tmp_path: Path):
    module = tmp_path / f"{script.stem}.mjs"  # .mjs: node checks it as a module, as the page's import does
    module.write_text(script.read_text())
    proc = subprocess.run(["node", "--check", str(module)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
