"""#34 item 9, the inspector: input SQLite cannot take is a 422 saying which parameter, never a 500, and
a slow search (1-2 characters scan) holds up only its own request."""

import threading
import time

import pytest
from fastapi.testclient import TestClient
from tests.unit.inspector.fake_store import build_store

from looprl.inspector.app import create_app
from looprl.store.reader import RunStoreReader

API = "/api/runs/toy-run"


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app([build_store(tmp_path / "toy-run")]), base_url="http://127.0.0.1:8765",
                    raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("path", [f"{API}/rollouts", f"{API}/rollouts/train-0-0"])
@pytest.mark.parametrize("q", ["ne\x00edle", "a\x00", "\x00"])
def test_a_nul_in_a_search_is_a_422(client, path, q):
    r = client.get(path, params={"q": q})
    assert r.status_code == 422 and "NUL" in r.json()["detail"]


@pytest.mark.parametrize("path", [f"{API}/rollouts", f"{API}/rollouts/train-0-0"])
@pytest.mark.parametrize("name, value", [("step", 2**70), ("step_min", -(2**70)), ("step_max", 2**63),
                                         ("min_log_level", 2**70), ("offset", 2**70)])
def test_an_integer_out_of_sqlites_range_is_a_422(client, path, name, value):
    r = client.get(path, params={name: value})
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert error["loc"] == ["query", name] and ("less than or equal" in error["msg"] or "greater" in error["msg"])


def test_the_largest_integers_sqlite_takes_still_work(client):
    assert client.get(f"{API}/rollouts", params={"step": 2**63 - 1}).json()["total"] == 0
    assert client.get(f"{API}/rollouts", params={"step_min": -(2**63), "split": "eval"}).json()["total"] == 2


def test_a_slow_search_does_not_hold_up_other_requests(client, monkeypatch):
    """A 1-2 character search scans; while one runs, the rest of the inspector answers."""
    started, release = threading.Event(), threading.Event()
    scan = RunStoreReader.list_rollouts

    def slow_scan(self, run_id, f=None, **kw):
        if f is not None and f.q == "ne":
            started.set()
            release.wait(20)
        return scan(self, run_id, f, **kw)

    monkeypatch.setattr(RunStoreReader, "list_rollouts", slow_scan)
    searching = threading.Thread(target=lambda: client.get(f"{API}/rollouts", params={"q": "ne"}))
    searching.start()
    try:
        assert started.wait(10)
        t0 = time.monotonic()
        for path in ("/api/runs", f"{API}/rollouts", f"{API}/rollouts/train-0-0", f"{API}/metrics",
                     f"{API}/rollouts/train-0-0/explain"):
            assert client.get(path).status_code == 200
        assert time.monotonic() - t0 < 5
    finally:
        release.set()
        searching.join()


def test_connections_are_reused_not_opened_per_request_or_thread(client):
    """The pool opens a connection only when every open one is busy: sequential requests share one."""
    source = client.app.state.catalog.sources[0]
    for _ in range(30):
        assert client.get(f"{API}/rollouts", params={"q": "ne"}).status_code == 200
        assert client.get(f"{API}/rollouts/train-0-0/explain").status_code == 200
    assert len(source._readers._all) == 1 and len(source._conns._all) == 1
