"""Fixtures for the command tests: an engine stand-in that records whether a command started it."""

from pathlib import Path
from typing import ClassVar

import pytest

import looprl.inference.backends


class FakeEngine:
    """`EngineProcess` in front of a scripted server: writes its log like the real one; `started` lists
    every start, so a test can assert a user error came before it."""

    base_url = ""
    started: ClassVar[list[Path]] = []

    def __init__(self, model: str, log_path: Path, **_: object) -> None:
        self.model_name, self.log_path = model, log_path

    def __enter__(self) -> "FakeEngine":
        FakeEngine.started.append(self.log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write("engine started\n")
        if not self.base_url:
            raise AssertionError("the engine started")
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def engine(monkeypatch):
    """The fake engine class; set `engine.base_url` to serve, else starting it fails the command."""
    monkeypatch.setattr(FakeEngine, "started", [])
    monkeypatch.setattr(FakeEngine, "base_url", "")
    monkeypatch.setattr(looprl.inference.backends, "EngineProcess", FakeEngine)  # what engine_process starts
    return FakeEngine
