"""#34 item 3: the inspector answers a foreign `Host` with 403 (DNS rebinding).

A page on `evil.example` whose DNS name the attacker re-points at 127.0.0.1 is same-origin with a
tokenless inspector on loopback: without a Host check it could read every rollout. Also checked:
loopback names pass (any port: SSH tunnels), and a token-guarded inspector on 0.0.0.0 works by any name.
"""

import socket
import subprocess
import sys
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.unit.inspector.fake_store import build_store

from looprl.inspector.app import create_app
from looprl.inspector.security import host_allowed

PATHS = ["/", "/runs/toy-run", "/api/runs", "/api/runs/toy-run/rollouts", "/static/inspector.css"]


@pytest.fixture
def run_dir(tmp_path):
    return build_store(tmp_path / "toy-run")


@pytest.mark.parametrize("path", PATHS)
def test_a_foreign_host_is_refused(run_dir, path):
    with TestClient(create_app([run_dir]), base_url="http://evil.example:8765") as c:
        r = c.get(path)
    assert r.status_code == 403 and "toy-run" not in r.text and "not this inspector's address" in r.text
    assert r.headers["x-frame-options"] == "DENY"  # the security headers still come with it


@pytest.mark.parametrize("host", ["localhost:8765", "127.0.0.1:8765", "[::1]:8765", "LOCALHOST:8765", "localhost",
                                  "127.0.0.1:9000"])
def test_loopback_names_pass(run_dir, host):
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        for path in PATHS:
            assert c.get(path, headers={"host": host}).status_code == 200, (host, path)


@pytest.mark.parametrize("host", ["evil.example:8765", "evil.example", "127.0.0.1.evil.example:8765", "",
                                  "evil.example@localhost:8765", "localhost:junk", "10.0.0.5:8765"])
def test_every_other_host_is_refused(run_dir, host):
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        assert c.get("/api/runs", headers={"host": host}).status_code == 403


def test_the_bound_loopback_address_passes():
    assert host_allowed("127.0.0.2:8765", "127.0.0.2") and host_allowed("localhost:8765", "::1")
    assert not host_allowed("myhost:8765", "127.0.0.1")


def test_a_token_guarded_inspector_on_every_address_answers_any_name_with_the_token(run_dir):
    with TestClient(create_app([run_dir], token="s3cret", host="0.0.0.0"), base_url="http://node17.cluster:8765") as c:
        assert c.get("/api/runs").status_code == 401
        assert c.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/runs/toy-run?token=s3cret").status_code == 200  # the cookie, then the page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_looprl_inspect_refuses_a_rebound_name(run_dir):
    """The real command: what a browser sends after the rebinding (`Host: evil.example:PORT`) gets 403."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "looprl.cli", "inspect", str(run_dir), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/api/runs"
        deadline = time.monotonic() + 60
        while True:
            try:
                ok = httpx.get(url)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
                time.sleep(0.2)
        assert ok.status_code == 200
        assert httpx.get(url, headers={"host": f"evil.example:{port}"}).status_code == 403
        assert httpx.get(f"http://localhost:{port}/").status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)
