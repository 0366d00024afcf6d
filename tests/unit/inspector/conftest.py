"""Fixtures: a fake run store and a TestClient on an inspector app serving it."""

import pytest
from fastapi.testclient import TestClient
from tests.unit.inspector.fake_store import build_store

from looprl.inspector.app import create_app


@pytest.fixture
def run_dir(tmp_path):
    return build_store(tmp_path / "toy-run")


@pytest.fixture
def client(run_dir):
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        yield c
