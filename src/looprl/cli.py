"""The `looprl` command.

A thin dispatcher: each subcommand lives in the package that owns it and is imported only when it
runs, so `looprl --help` stays instant (no torch import). A `UserError` anywhere becomes a one-line
message and exit status 2; a reader that stops early (`looprl rollouts RUN --json | head`) ends
the command quietly with status 1. Every command first makes the files it and its children create
private to the user (`utils.private.make_files_private`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from looprl.errors import UserError
from looprl.utils.private import make_files_private
from looprl.utils.terminal import printable

BROKEN_PIPE_STATUS = 1
"""Exit status when stdout's reader went away: what rich's consoles and the Python docs' recipe use."""

# subcommand -> module exposing `add_arguments(parser)` and `run(args) -> int`
COMMANDS: dict[str, tuple[str, str]] = {
    "rl": ("looprl.launch.rl_command", "a whole training run: inference, env servers, orchestrator, trainer"),
    "eval": ("looprl.commands.eval.command", "rollouts of an environment against a model, recorded to a run dir"),
    "validate": ("looprl.commands.validate.command", "check an environment against the contract"),
    "rollouts": ("looprl.commands.rollouts", "a run's rollouts as a table or JSON lines"),
    "logs": ("looprl.commands.logs", "a rollout's (or a run's) log records"),
    "metrics": ("looprl.commands.metrics", "a run's per-step training metrics"),
    "rescore": ("looprl.commands.rescore.command", "re-run an (edited) env's reward code on a run's stored rollouts"),
    "replay": ("looprl.commands.replay.command", "re-run one stored rollout with the model's recorded replies"),
    "inspect": ("looprl.inspector.command", "the rollout inspector web UI"),
    "inference": ("looprl.inference.command", "the embedded OpenAI-compatible inference engine"),
}


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="looprl",
                                     description="Reinforcement learning for language models on Python environments.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parsers = {}
    for name, (_module, help_text) in COMMANDS.items():
        parsers[name] = sub.add_parser(name, help=help_text, description=help_text)
    return parser, parsers


def main(argv: list[str] | None = None) -> int:
    make_files_private()  # run directories 0700, files 0600, in every process the command starts
    argv = sys.argv[1:] if argv is None else argv
    parser, parsers = build_parser(argv)
    name = argv[0] if argv and argv[0] in COMMANDS else None
    if name is None:
        parser.parse_args(argv)  # prints help / usage errors
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    module.add_arguments(parsers[name])
    args = parser.parse_args(argv)
    try:
        status = int(module.run(args) or 0)
        sys.stdout.flush()  # a closed pipe raises here, not at interpreter exit where it can't be caught
        return status
    except BrokenPipeError:
        # the reader is gone: point stdout at devnull so the interpreter's final flush stays silent
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_STATUS
    except UserError as e:
        print(f"looprl {name}: error: {printable(str(e))}", file=sys.stderr)  # it may quote env or model text
        return 2
    except KeyboardInterrupt:
        print(f"looprl {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
