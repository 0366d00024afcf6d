"""How `looprl rl` splits a CPU's cores between the engine and the trainer (inherited by the children)."""

import os

import pytest

from looprl.launch.rl_command import share_cpu_threads


@pytest.fixture
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    monkeypatch.setattr("looprl.launch.rl_command.local_gpu_count", lambda: 0)


@pytest.mark.usefixtures("four_cores")
def test_overlapping_processes_each_get_half_of_the_cores() -> None:
    share_cpu_threads(max_off_policy_steps=1)
    assert os.environ["OMP_NUM_THREADS"] == "2" and os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.usefixtures("four_cores")
def test_processes_taking_turns_each_get_every_core() -> None:
    share_cpu_threads(max_off_policy_steps=0)
    assert os.environ["OMP_NUM_THREADS"] == "4"


@pytest.mark.usefixtures("four_cores")
def test_the_users_thread_count_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    share_cpu_threads(max_off_policy_steps=0)
    assert os.environ["OMP_NUM_THREADS"] == "3"
