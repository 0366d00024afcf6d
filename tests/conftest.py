"""Shared fixtures: global logging state and the umask reset between tests."""

import logging
import os

import pytest


@pytest.fixture(autouse=True)
def _restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def _restore_umask():
    """`looprl.cli.main` run in-process tightens the umask (`make_files_private`) for the rest of the process."""
    umask = os.umask(0o022)
    os.umask(umask)
    yield
    os.umask(umask)
