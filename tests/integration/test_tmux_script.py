"""scripts/tmux.sh with Debian's tmux: four panes following the run's logs (on a private tmux server)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PANES = {"Trainer": "trainer.log", "Orchestrator": "orchestrator.log", "Envs": "envs/eval/MyEnv/env_worker_1.log",
         "Inference": "inference.log"}

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)")


@pytest.fixture
def tmux_env(tmp_path):
    env = {**os.environ, "TMUX_TMPDIR": str(tmp_path / "sock")}
    env.pop("TMUX", None)
    (tmp_path / "sock").mkdir()
    yield env
    subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)


def tmux(env, *args: str) -> str:
    return subprocess.run(["tmux", *args], env=env, capture_output=True, text=True, check=True).stdout


def test_four_panes_follow_the_run_logs(tmp_path, tmux_env):
    logs = tmp_path / "run" / "logs"
    (logs / "envs/train/MyEnv").mkdir(parents=True)
    (logs / "trainer.log").write_text("")
    proc = subprocess.run(["bash", str(ROOT / "scripts/tmux.sh"), "-s", "run1", "-o", str(tmp_path / "run"), "-d"],
                          env=tmux_env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    panes = [line.split("\t") for line in tmux(
        tmux_env, "list-panes", "-t", "run1:logs", "-F", "#{pane_index}\t#{pane_title}\t#{pane_start_command}"
    ).splitlines()]
    assert [title for _, title, _ in panes] == list(PANES)
    commands = {title: command for _, title, command in panes}
    for title in ("Trainer", "Orchestrator", "Inference"):
        assert str(logs / PANES[title]) in commands[title] and "tail" in commands[title]
    assert str(logs / "envs") in commands["Envs"]
    # Each pane shows what is appended to its file, env logs created after the start included.
    for title, name in PANES.items():
        (logs / name).parent.mkdir(parents=True, exist_ok=True)
        with (logs / name).open("a") as f:
            f.write(f"line-for-{title}\n")
    deadline = time.monotonic() + 60
    shown: dict[str, str] = {}
    while time.monotonic() < deadline:
        shown = {title: tmux(tmux_env, "capture-pane", "-p", "-t", f"run1:logs.{index}")
                 for index, title, _ in panes}
        if all(f"line-for-{title}" in text for title, text in shown.items()):
            break
        time.sleep(0.5)
    for title, text in shown.items():
        assert f"line-for-{title}" in text and all(f"line-for-{other}" not in text for other in PANES if other != title)


def test_an_existing_session_is_an_error(tmp_path, tmux_env):
    args = ["bash", str(ROOT / "scripts/tmux.sh"), "-s", "dup", "-o", str(tmp_path), "-d"]
    assert subprocess.run(args, env=tmux_env, capture_output=True).returncode == 0
    again = subprocess.run(args, env=tmux_env, capture_output=True, text=True)
    assert again.returncode == 1 and "already exists" in again.stderr
