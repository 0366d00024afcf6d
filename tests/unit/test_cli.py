"""The `looprl` dispatcher: a reader that leaves early ends a command quietly, and the README
documents every flag of every subcommand and every termination reason."""

import os
import re
import sys
from pathlib import Path

import pytest
from tests.unit.inspector.fake_store import build_store

from looprl.cli import BROKEN_PIPE_STATUS, COMMANDS, main
from looprl.envs.types import FAILURE_REASONS, SCORED_REASONS

README = Path(__file__).parents[2] / "README.md"


@pytest.mark.parametrize("args", [["rollouts", "--json"], ["rollouts"], ["logs", "--json"], ["logs"], ["metrics"],
                                  ["metrics", "--all"], ["metrics", "--json"]])
def test_a_closed_pipe_ends_the_command_quietly(args, tmp_path, monkeypatch, capsys):
    run_dir = build_store(tmp_path / "run")
    read, write = os.pipe()
    os.close(read)  # `| head` has exited
    with open(write, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        try:
            status = main([args[0], str(run_dir), *args[1:]])
        except SystemExit as e:  # rich's consoles exit on a broken pipe themselves
            status = e.code
        monkeypatch.undo()
    assert status == BROKEN_PIPE_STATUS and capsys.readouterr().err == ""


def readme_units() -> list[str]:
    """The README cut into paragraphs, and tables into rows: the places one command is described."""
    units = []
    for block in README.read_text().split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        units += rows or [block]
    return units


@pytest.mark.parametrize("command", COMMANDS)
def test_the_readme_documents_every_flag(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", capsys.readouterr().out)) - {"--help"}
    described = "\n".join(u for u in readme_units() if f"looprl {command} " in u or f"looprl {command}`" in u)
    assert flags and not {f for f in flags if f not in described}, f"README lacks flags of `looprl {command}`"


def test_the_readme_names_every_termination_reason():
    [paragraph] = [u for u in readme_units() if u.startswith("**Termination reasons.**")]
    assert not {r for r in SCORED_REASONS | FAILURE_REASONS if f"`{r}`" not in paragraph}
