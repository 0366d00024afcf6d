"""The `looprl` dispatcher: a reader that leaves early ends a command quietly, and the docs (the README
and the pages under docs/) describe every flag of every subcommand and every termination reason."""

import os
import re
import sys

import pytest
from tests.support.docs import doc_units
from tests.unit.inspector.fake_store import build_store

from looprl.cli import BROKEN_PIPE_STATUS, COMMANDS, main
from looprl.envs.types import FAILURE_REASONS, SCORED_REASONS


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


@pytest.mark.parametrize("command", COMMANDS)
def test_the_docs_describe_every_flag(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", capsys.readouterr().out)) - {"--help"}
    described = "\n".join(u for u in doc_units() if f"looprl {command} " in u or f"looprl {command}`" in u)
    missing = sorted(f for f in flags if f not in described)
    assert flags and not missing, f"no paragraph of the docs that shows `looprl {command}` describes {missing}"


def test_the_docs_name_every_termination_reason():
    [paragraph] = [u for u in doc_units() if u.startswith("**Termination reasons.**")]
    assert not {r for r in SCORED_REASONS | FAILURE_REASONS if f"`{r}`" not in paragraph}
