"""The hand-written docs as the doc tests read them: pages, paragraphs, code, and what the code accepts.

The hand-written docs are the README and docs/**/*.md, less docs/reference/ (generated from the code by
scripts/gen_reference.py: they list every flag and key by construction, so they vouch for nothing). What
the code accepts comes from that script too: the same parsers and config tables the references show.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import get_origin

from looprl.config import RLConfig

ROOT = Path(__file__).parents[2]
GENERATED = ROOT / "docs" / "reference"
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


@cache
def generator() -> ModuleType:
    """scripts/gen_reference.py (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


@cache
def command_flags(name: str) -> frozenset[str]:
    """The long flags `looprl NAME` accepts."""
    parser = generator().command_parsers()[name]
    return frozenset(s for action in parser._actions for s in action.option_strings if s.startswith("--"))


@cache
def _config_keys() -> tuple[frozenset[str], frozenset[str]]:
    """Every table and key of a `looprl rl` config, and the free-form tables among them (any name is a key
    there: `orchestrator.reward_weights`, `env.args`)."""
    keys, free = set(), set()
    for path, model, *_ in generator().config_tables(RLConfig, ()):
        keys.add(path)
        for name, field in model.model_fields.items():
            key = f"{path}.{name}" if path else name
            keys.add(key)
            if get_origin(field.annotation) is dict:
                free.add(key)
    return frozenset(keys), frozenset(free)


def config_key_exists(dotted: str) -> bool:
    keys, free = _config_keys()
    return dotted in keys or any(dotted.startswith(f"{table}.") for table in free)
