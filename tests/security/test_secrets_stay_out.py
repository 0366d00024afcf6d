"""A known key written through every command that takes one leaves no trace in the run directory, and the
run directory is the user's alone (issue #34, items 2 and 10).

`looprl eval` (key from `$OPENAI_API_KEY`, `--api-key-file` or `--api-key`) runs against the scripted
server, which sees the key; then every byte of every file of the run directory (`looprl.db` and any
`-wal`, logs, tracker files) is searched for it. `looprl validate` sends the key and prints no trace of
it; `looprl inspect` takes its token from the environment and never prints it. A finished run directory
is 0700 and every file in it 0600.
"""

import importlib.util
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from tests.support.cli import ROOT, looprl
from tests.support.scripted_server import Reply, ScriptedServer

ENV = "examples/demo/env.py:AdditionEnv"


def canary() -> str:
    return f"sk-test-LOOPRL-CANARY-{uuid.uuid4().hex}"


def answer(body) -> Reply:
    return Reply("the sea is wide <answer>1</answer>")


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def evaluate(out: Path, *flags: str) -> tuple[subprocess.CompletedProcess, list[str | None]]:
    with ScriptedServer(answer) as server:
        proc = looprl("eval", ENV, "--base-url", server.base_url, "-n", "2", "-r", "2", "--output", str(out), *flags)
    return proc, server.authorizations


def test_eval_stores_no_trace_of_the_key_and_keeps_its_run_private(tmp_path, monkeypatch):
    key = canary()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    out = tmp_path / "run"
    trackers = ["--tracker", "tensorboard"] if importlib.util.find_spec("tensorboard") else []
    proc, authorizations = evaluate(out, *trackers)
    assert authorizations and set(authorizations) == {f"Bearer {key}"}  # the key was used
    assert key not in proc.stdout + proc.stderr
    assert files_holding(out, key) == []
    with sqlite3.connect(out / "looprl.db") as db:
        assert json.loads(db.execute("SELECT config FROM runs").fetchone()[0])["api_key"] == "**********"

    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    modes = {str(p.relative_to(out)): stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*")}
    assert "looprl.db" in modes and any(name.endswith(".log") for name in modes)
    wrong = {name: oct(mode) for name, mode in modes.items()
             if mode != (0o700 if (out / name).is_dir() else 0o600)}
    assert not wrong


def test_eval_reads_the_key_from_a_file_and_warns_about_the_flag(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    key = canary()
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    proc, authorizations = evaluate(tmp_path / "from_file", "--api-key-file", str(key_file))
    assert set(authorizations) == {f"Bearer {key}"} and "warning" not in proc.stderr
    assert files_holding(tmp_path / "from_file", key) == []

    proc, authorizations = evaluate(tmp_path / "from_flag", "--api-key", key)
    assert set(authorizations) == {f"Bearer {key}"}
    assert "--api-key puts the secret on the command line" in proc.stderr
    assert files_holding(tmp_path / "from_flag", key) == []


def test_validate_sends_the_key_and_prints_no_trace_of_it(monkeypatch):
    key = canary()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with ScriptedServer(answer) as server:
        proc = looprl("validate", ENV, "--base-url", server.base_url)
    assert "AdditionEnv: OK" in proc.stdout
    assert server.authorizations and set(server.authorizations) == {f"Bearer {key}"}
    assert key not in proc.stdout + proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_inspector_takes_its_token_from_the_environment_and_never_prints_it(tmp_path):
    from looprl.store.writer import RunStoreWriter

    RunStoreWriter(tmp_path / "run").close()
    token, port = canary(), free_port()
    log = tmp_path / "inspect.log"
    env = {**os.environ, "LOOPRL_INSPECTOR_TOKEN": token}
    with log.open("wb") as sink:
        server = subprocess.Popen([sys.executable, "-m", "looprl.cli", "inspect", str(tmp_path / "run"),
                                   "--port", str(port)], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/api/runs"
        deadline = time.monotonic() + 60
        while status_or_none(url) is None:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert status(url) == 401 and status(url, token) == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
    printed = log.read_text()
    assert "looprl inspector on" in printed and token not in printed


def status_or_none(url: str) -> int | None:
    try:
        return status(url)
    except OSError:
        return None

