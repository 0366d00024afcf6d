"""The embedded engine started as `looprl rl` starts it (`run_engine` with the run secret and the run's
weights directories, a child process on a tiny random model): 401 without the secret or with a wrong one,
403 for weights outside the run (a symlink inside `broadcasts/` too), the authenticated in-run update
accepted, the secret in its environment and not on its command line, a loopback socket."""

import socket
from pathlib import Path

import httpx
import pytest
from safetensors.torch import save_file
from tests.integration.test_rl_cli import config
from transformers import AutoModelForCausalLM

from looprl.config import RLConfig, load_config
from looprl.handoff import mark_stable
from looprl.handoff.engine_access import SECRET_ENV, create_run_secret
from looprl.inference.backends import run_engine
from looprl.paths import broadcast_dir, broadcasts_dir, log_path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`(engine, run_dir, secret, model_dir)`: the engine of a run, up."""
    tmp = tmp_path_factory.mktemp("security")
    cfg = load_config(RLConfig, ["@", str(config(tmp))])
    run_dir = cfg.output_dir
    secret = create_run_secret(run_dir)
    engine = run_engine(cfg, log_path(run_dir, "inference"), secret=secret, weights_dirs=[broadcasts_dir(run_dir)])
    with engine:
        yield engine, run_dir, secret, Path(cfg.model.name)


def broadcast(model_dir: Path, target: Path) -> Path:
    """The model's weights, changed, as a trainer broadcast in `target`."""
    target.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    save_file({k: v * 2 for k, v in model.state_dict().items() if "norm" in k}, target / "model.safetensors")
    mark_stable(target)
    return target


def post(engine, path, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(f"{engine.url}/update_weights", json={"path": str(path)}, headers=headers, timeout=120)


def test_update_weights_needs_the_run_secret(run):
    engine, run_dir, secret, model_dir = run
    path = broadcast(model_dir, broadcast_dir(run_dir, 1))
    for token in (None, "not-the-secret", secret + "x", secret[:-1]):
        r = post(engine, path, token)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
    r = httpx.post(f"{engine.url}/update_weights", json={"path": str(path)}, headers={"Authorization": secret})
    assert r.status_code == 401  # the secret without the Bearer scheme
    assert httpx.get(f"{engine.url}/health").json()["weights"]["version"] == 0  # nothing was loaded


def test_every_route_but_health_needs_the_secret(run):
    engine, _, secret, _ = run
    body = {"model": engine.model_name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert httpx.post(f"{engine.base_url}/chat/completions", json=body, timeout=60).status_code == 401
    assert httpx.get(f"{engine.base_url}/models").status_code == 401
    ok = httpx.post(f"{engine.base_url}/chat/completions", json=body, timeout=60,
                    headers={"Authorization": f"Bearer {secret}"})
    assert ok.status_code == 200, ok.text
    assert httpx.get(f"{engine.url}/health").status_code == 200  # the launcher's readiness check


def test_weights_outside_the_run_are_refused(run, tmp_path):
    engine, run_dir, secret, model_dir = run
    outside = broadcast(model_dir, tmp_path / "elsewhere")
    r = post(engine, outside, secret)
    assert r.status_code == 403 and r.json()["error"]["code"] == "path_outside_run", r.text
    link = broadcasts_dir(run_dir) / "step_7"  # inside broadcasts/ by name, outside once resolved
    link.symlink_to(outside, target_is_directory=True)
    assert post(engine, link, secret).status_code == 403
    dotdot = broadcasts_dir(run_dir) / ".." / ".." / outside.relative_to(run_dir.parent.parent)
    assert post(engine, dotdot, secret).status_code == 403
    assert httpx.get(f"{engine.url}/health").json()["weights"]["version"] == 0


def test_the_authenticated_update_inside_the_run_is_loaded(run):
    engine, run_dir, secret, model_dir = run
    path = broadcast(model_dir, broadcast_dir(run_dir, 2))
    r = httpx.post(f"{engine.url}/update_weights", json={"path": str(path), "version": 2},
                   headers={"Authorization": f"Bearer {secret}"}, timeout=120)
    assert r.status_code == 200 and r.json()["version"] == 2, r.text


def test_the_secret_is_in_the_engines_environment_not_its_command_line(run):
    engine, run_dir, secret, _ = run
    pid = engine.process.pid
    assert secret not in Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert f"{SECRET_ENV}={secret}".encode() in environ
    assert (run_dir / "run_secret").stat().st_mode & 0o777 == 0o600
    assert secret not in log_path(run_dir, "inference").read_text()


def test_the_engine_listens_on_loopback_only(run):
    engine, *_ = run
    assert engine.host == "127.0.0.1"
    listening = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    local = [fields[1] for fields in listening if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == engine.port]
    assert local == [f"0100007F:{engine.port:04X}"]  # 127.0.0.1, not 0.0.0.0
    address = _non_loopback_address()
    if address is not None:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://{address}:{engine.port}/health", timeout=5)


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address
