"""The run secret: made once (0600), handed over only through the environment, in no command line, log,
config or store; engines bind loopback unless given the secret; the engine maps the shared-memory region
read-only; on SLURM the engines and the orchestrator get the secret from the file and the trainer does not."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tests.integration.test_rl_cli import ROOT, config

from looprl.handoff.engine_access import SECRET_ENV, create_run_secret, take_run_secret
from looprl.handoff.shared_weights import SharedWeights, layout, write_message
from looprl.inference import __main__ as inference_main
from looprl.inference.weight_update import OutsideRun, load_update


def test_the_secret_file_is_made_once_and_private(tmp_path, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    secret = create_run_secret(tmp_path / "run")
    path = tmp_path / "run" / "run_secret"
    assert len(secret) >= 32 and path.read_text().strip() == secret
    assert path.stat().st_mode & 0o777 == 0o600
    assert create_run_secret(tmp_path / "run") == secret  # a resumed run keeps its secret
    path.chmod(0o644)
    monkeypatch.setenv(SECRET_ENV, "the-users-own")  # one secret shared with engines started by hand
    assert create_run_secret(tmp_path / "run") == "the-users-own"
    assert path.read_text().strip() == "the-users-own" and path.stat().st_mode & 0o777 == 0o600


def test_the_orchestrator_takes_the_secret_out_of_its_environment(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "s")
    assert take_run_secret() == "s" and SECRET_ENV not in os.environ  # env servers started later never see it


def test_python_m_looprl_inference_binds_loopback_by_default(tmp_path, monkeypatch, capsys):
    hosts = []

    class Engine:
        def serve_foreground(self) -> int:
            return 0

    def run_engine(cfg, host, **kwargs):
        hosts.append((host, kwargs["secret"]))
        return Engine()

    monkeypatch.setattr("looprl.config.read_run_config", lambda run_dir: None)
    monkeypatch.setattr("looprl.inference.backends.run_engine", run_engine)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert inference_main.main([str(tmp_path), "--port", "8000"]) == 0
    assert inference_main.main([str(tmp_path), "--port", "8000", "--host", "0.0.0.0"]) == 2
    assert "--host 0.0.0.0 would let anyone on the network" in capsys.readouterr().err
    monkeypatch.setenv(SECRET_ENV, "s")
    assert inference_main.main([str(tmp_path), "--port", "8000", "--host", "10.0.0.5"]) == 0
    assert hosts == [("127.0.0.1", None), ("10.0.0.5", "s")]


def test_looprl_inference_on_the_network_needs_a_secret(monkeypatch, capsys):
    from looprl.cli import main

    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert main(["inference", "--host", "0.0.0.0", "--model", "/nonexistent"]) == 2  # before any model loads
    assert f"set {SECRET_ENV}" in capsys.readouterr().err


def test_the_engine_maps_the_region_read_only_and_only_the_runs(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    state = model.state_dict()
    entries, nbytes = layout((n, str(t.dtype).removeprefix("torch."), list(t.shape), t.nbytes)
                             for n, t in state.items())
    region_dir = tmp_path / "shm"
    region_dir.mkdir()
    from looprl.handoff.shared_weights import Region

    writer = Region(region_dir / "weights.bin", nbytes, create=True)
    for name, view in writer.views(entries).items():
        view.copy_(state[name])
    writer.publish(1)
    step = tmp_path / "run" / "broadcasts" / "step_1"
    step.mkdir(parents=True)
    message = SharedWeights(region=str(region_dir / "weights.bin"), version=1, nbytes=nbytes, tensors=entries)
    write_message(step, message)

    update = load_update(step, model, 1, allowed=[tmp_path / "run" / "broadcasts", region_dir])
    update.apply(model)
    maps = [line.split() for line in Path("/proc/self/maps").read_text().splitlines() if line.endswith("weights.bin")]
    mine = [fields[1] for fields in maps if fields[-1] == str((region_dir / "weights.bin").resolve())]
    assert "rw-s" in mine and "r--s" in mine  # the writer's mapping and the engine's read-only one
    assert torch.equal(model.state_dict()[entries[0].name], state[entries[0].name])
    with pytest.raises(OutsideRun):  # a message in the run naming a region outside it
        load_update(step, model, 1, allowed=[tmp_path / "run" / "broadcasts"])


@pytest.mark.slow  # the whole sbatch script, its fake nodes as processes
def test_slurm_engines_and_orchestrator_get_the_secret_from_the_file_not_the_script(tmp_path):
    from tests.unit.launch.test_slurm import SECRET, run_job

    from looprl.paths import log_path, logs_dir

    out = tmp_path / "run"
    run_job(tmp_path, out)
    assert SECRET not in (out / "rl.sbatch").read_text()
    assert f"orchestrator secret {SECRET}" in log_path(out, "orchestrator").read_text()
    for node in (0, 1):
        engine = (logs_dir(out) / f"inference/node_{node}.log").read_text()
        assert f"engine secret {SECRET}" in engine and f"--host node{node} --port 8123" in engine
        assert "with the run secret" not in (logs_dir(out) / f"trainer/node_{node}.log").read_text()


@pytest.mark.slow  # a whole `looprl rl` run on a tiny model
@pytest.mark.parametrize("exported", [None, "the-users-exported-secret"])
def test_looprl_rl_hands_the_secret_over_in_the_environment_only(tmp_path, exported):
    """Every process `looprl rl` starts, polled while the run runs: the secret in none's command line, in the
    environment of the engine and the orchestrator only (not the trainer's, not the env servers' or workers',
    which run user code); afterwards in no file of the run but its 0600 secret file. Also when the user
    exported it (as engines started by hand at `inference.urls` need): the trainer must not inherit it."""
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV} | ({SECRET_ENV: exported} if exported else {})
    launcher = subprocess.Popen([sys.executable, "-m", "looprl.cli", "rl", "@", str(config(tmp_path)), "--max_steps",
                                 "2", "--orchestrator.eval.num_examples", "0"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # (pid, command line) -> whether its environment held the secret. Keyed by the command line too: a child the
    # orchestrator forks shows the orchestrator's command line and environment until it execs, so what a pid held
    # before its exec belongs to the orchestrator, not to the env server it becomes.
    seen: dict[tuple[int, str], bool] = {}
    secret = None
    while launcher.poll() is None:
        if secret is None and (run / "run_secret").is_file():
            secret = (run / "run_secret").read_text().strip() or None
        for pid in _descendants(launcher.pid):
            try:
                cmdline = _cmdline(pid)
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                if _cmdline(pid) != cmdline:
                    continue  # it exec'd between the two reads: the environment read may be either program's
            except OSError:
                continue
            if secret is not None:
                assert secret not in cmdline, cmdline
                has = f"{SECRET_ENV}={secret}".encode() in environ
                seen[(pid, cmdline)] = has or seen.get((pid, cmdline), False)
        time.sleep(0.2)
    output = launcher.stdout.read().decode()
    assert launcher.returncode == 0, output
    assert secret is not None and (run / "run_secret").stat().st_mode & 0o777 == 0o600
    assert exported in (None, secret)

    def holders(part: str) -> set[bool]:
        return {has for (_, cmdline), has in seen.items() if part in cmdline}

    assert holders("looprl.cli inference") == {True}
    assert holders("-m looprl.orchestrator") == {True}
    assert holders("looprl.trainer") == {False}
    assert holders("looprl.envserver") == {False}  # the env servers and their workers
    assert secret not in output
    for path in run.rglob("*"):
        if path.is_file() and path.name != "run_secret":
            assert secret.encode() not in path.read_bytes(), path


def _cmdline(pid: int) -> str:
    """A process's command line, its arguments joined by spaces."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        found += children
        frontier += children
    return found
