"""The hand-written docs as the doc tests read them: pages, paragraphs, code, and what the code accepts.

The hand-written docs are the README and docs/**/*.md, less docs/reference/ (generated from the code by
scripts/gen_reference.py: they list every flag and key by construction, so they vouch for nothing).
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from looprl.cli import COMMANDS, build_parser
from looprl.config import RLConfig

ROOT = Path(__file__).parents[2]
GENERATED = ROOT / "docs" / "reference"
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def doc_pages() -> list[Path]:
    pages = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *(p for p in pages if GENERATED not in p.parents)]


def doc_units() -> list[str]:
    """The docs cut into paragraphs, and tables into rows: the places one command is described."""
    units = []
    for block in "\n\n".join(p.read_text() for p in doc_pages()).split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        units += rows or [block]
    return units


def code_snippets(text: str) -> Iterator[str]:
    """Each line of a fenced or indented code block, and each inline code span of the prose."""
    for block in _FENCE.findall(text):
        yield from block.splitlines()[1:-1]
    prose = _FENCE.sub("", text)
    yield from (line for line in prose.splitlines() if line.startswith("    "))
    yield from re.findall(r"`([^`\n]+)`", prose)


def command_flags(name: str) -> set[str]:
    """The long flags `looprl NAME` accepts, from the parser that `--help` prints."""
    _, parsers = build_parser([])
    parser = parsers[name]
    importlib.import_module(COMMANDS[name][0]).add_arguments(parser)
    return {s for a in parser._actions if not isinstance(a, argparse._HelpAction)
            for s in a.option_strings if s.startswith("--")}


def config_key_exists(dotted: str) -> bool:
    """Whether `a.b.c` is a key (or table) of a `looprl rl` config; below a free-form table
    (`orchestrator.reward_weights`, `env.args`) any name is one."""
    models: list[Any] = [RLConfig]
    for part in dotted.split("."):
        fields = [m.model_fields[part] for m in models if _is_model(m) and part in m.model_fields]
        if not fields:
            return any(get_origin(m) is dict for m in models)
        models = [t for f in fields for t in _members(f.annotation)]
    return True


def _members(annotation: Any) -> list[Any]:
    if get_origin(annotation) is Union or type(annotation).__name__ == "UnionType":
        return [m for arg in get_args(annotation) for m in _members(arg)]
    return [annotation]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
