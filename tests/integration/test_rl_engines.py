"""`looprl rl` over two engines it did not start (`inference.urls`): the real rl path with the orchestrator's
engine client fanned out, as on a SLURM job's inference nodes. Rollouts are dealt out to both engines
(`tests/unit/gateway`); every weight update must reach both, and the run completes."""

import httpx
from tests.integration.test_rl_cli import config, looprl, store_steps

from looprl.inference.process import EngineProcess


def test_rl_over_two_engines_updates_both(tmp_path, monkeypatch):
    """The engines started by hand share the run's secret (`LOOPRL_RUN_SECRET`, set for `looprl rl` too) and
    load weights from its broadcasts only, as docs/inference.md tells users to start them."""
    cfg = config(tmp_path)
    model = str(tmp_path / "tiny")
    run = tmp_path / "run"
    logs = [tmp_path / "engine_a.log", tmp_path / "engine_b.log"]
    monkeypatch.setenv("LOOPRL_RUN_SECRET", "shared-by-hand")
    access = {"secret": "shared-by-hand", "weights_dirs": [run / "broadcasts"]}
    with EngineProcess(model, log_path=logs[0], **access) as a, EngineProcess(model, log_path=logs[1], **access) as b:
        urls = f'["{a.url}", "{b.url}/"]'
        looprl("rl", "@", str(cfg), "--max_steps", "2", "--orchestrator.eval.num_examples", "0",
               "--inference.urls", urls)
        versions = [httpx.get(f"{engine.url}/health").json()["weights"]["version"] for engine in (a, b)]
    assert versions == [2, 2]
    for log in logs:
        assert f"loaded weights version 2 from {run.resolve() / 'broadcasts' / 'step_2'}" in log.read_text()
    assert store_steps(run) == ([1, 2], [(1, 8), (2, 8)])
    assert not (run / "logs" / "inference.log").exists()  # no engine of its own


def test_an_engine_url_that_does_not_answer_is_one_line(tmp_path):
    import subprocess
    import sys

    from tests.integration.test_rl_cli import ROOT

    proc = subprocess.run([sys.executable, "-m", "looprl.cli", "rl", "@", str(config(tmp_path)),
                           "--inference.urls", '["http://127.0.0.1:9"]'], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "no engine answers http://127.0.0.1:9/health" in proc.stderr


def test_an_engine_with_another_secret_is_one_line(tmp_path, monkeypatch):
    import subprocess
    import sys

    from tests.integration.test_rl_cli import ROOT

    cfg = config(tmp_path)
    with EngineProcess(str(tmp_path / "tiny"), log_path=tmp_path / "engine.log", secret="the-engines") as engine:
        monkeypatch.setenv("LOOPRL_RUN_SECRET", "another")  # looprl rl's
        proc = subprocess.run([sys.executable, "-m", "looprl.cli", "rl", "@", str(cfg), "--inference.urls",
                               f'["{engine.url}"]'], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and f"the engine at {engine.url} refuses this run's secret" in proc.stderr
