"""The inspector's defences: token checks, loopback-only without a token, inert pages, CSP."""

import json

import pytest
from fastapi.testclient import TestClient
from tests.unit.inspector.fake_store import XSS_LOG, XSS_MESSAGE, XSS_TOOL

from looprl.cli import main
from looprl.errors import UserError
from looprl.inspector.app import create_app
from looprl.inspector.security import COOKIE, check_bind


@pytest.fixture
def guarded(run_dir):
    with TestClient(create_app([run_dir], token="s3cret"), base_url="http://127.0.0.1:8765") as c:
        yield c


@pytest.mark.parametrize("path", ["/", "/runs/toy-run", "/runs/toy-run/rollouts/train-0-0", "/api/runs",
                                  "/api/runs/toy-run/rollouts", "/api/runs/toy-run/metrics", "/static/inspector.css"])
def test_every_request_needs_the_token(guarded, path):
    assert guarded.get(path).status_code == 401
    assert guarded.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.get(path, cookies={COOKIE: "wrong"}).status_code == 401
    assert guarded.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_token_in_the_url_once_then_a_cookie(guarded):
    r = guarded.get("/runs/toy-run?token=s3cret&tab=eval", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/runs/toy-run?tab=eval"  # token leaves the URL
    assert "httponly" in r.headers["set-cookie"].lower() and "samesite=strict" in r.headers["set-cookie"].lower()
    assert guarded.get("/api/runs").status_code == 200  # the client kept the cookie
    assert guarded.get("/runs/toy-run").status_code == 200


def test_api_accepts_the_token_as_a_query_parameter(run_dir):
    with TestClient(create_app([run_dir], token="s3cret"), base_url="http://127.0.0.1:8765") as c:
        assert c.get("/api/runs?token=s3cret").status_code == 200


def test_no_token_needed_when_none_is_set(client):
    assert client.get("/api/runs").status_code == 200


def test_non_loopback_host_needs_a_token():
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        check_bind(host, None)
    check_bind("0.0.0.0", "t")
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.com"):
        with pytest.raises(UserError, match="--token"):
            check_bind(host, None)


def test_inspect_command_refuses_a_public_host_without_token_at_once(run_dir, capsys, monkeypatch):
    monkeypatch.delenv("LOOPRL_INSPECTOR_TOKEN", raising=False)
    assert main(["inspect", str(run_dir), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("looprl inspect: error:") and "--token" in err and len(err.strip().splitlines()) == 1


def test_inspect_command_rejects_a_missing_run_dir(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path)]) == 2
    assert "not a looprl run directory" in capsys.readouterr().err


def test_security_headers_on_every_response(client):
    for path in ("/", "/api/runs", "/static/js/dom.js", "/api/runs/nope"):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"


def test_pages_escape_ids_and_ship_no_outside_requests(client, tmp_path):
    r = client.get('/runs/toy-run/rollouts/"><img src=x onerror=alert(1)>')  # no such rollout: the HTML error page
    assert r.status_code == 404 and "<img" not in r.text and "&lt;img src=x onerror=alert(1)&gt;" in r.text
    for path in ("/", "/runs/toy-run"):
        html = client.get(path).text
        assert "http://" not in html and "https://" not in html and "<script>" not in html.replace("<script type", "")


def test_store_strings_reach_the_browser_only_as_json_data(client):
    body = client.get("/api/runs/toy-run/rollouts/train-0-3")
    assert body.headers["content-type"].startswith("application/json")
    data = body.json()
    text = json.dumps(data)
    assert XSS_MESSAGE in text and XSS_TOOL in text and XSS_LOG in text


def test_static_code_never_uses_innerhtml():
    from pathlib import Path

    import looprl.inspector as pkg
    for path in (Path(pkg.__file__).parent / "static").rglob("*.js"):
        code = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in code, f"{path.name} uses {sink}"
