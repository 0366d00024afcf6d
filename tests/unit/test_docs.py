"""The docs say what the code does: the generated references are current, and every `looprl` command
line and config key the hand-written pages show exists (the other direction, every flag described, is
`test_cli.py`'s)."""

import re

import pytest
from tests.support.docs import ROOT, code_snippets, command_flags, config_key_exists, doc_pages, generator

from looprl.cli import COMMANDS
from looprl.config import RLConfig


@pytest.mark.parametrize("page", ["config", "cli"])
def test_the_generated_reference_is_current(page):
    gen = generator()
    path, text = {"config": (gen.CONFIG_PAGE, gen.config_reference), "cli": (gen.CLI_PAGE, gen.cli_reference)}[page]
    assert path.read_text() == text(), (f"{path.relative_to(ROOT)} is stale: regenerate it with "
                                        f"`PYTHONPATH=src python scripts/gen_reference.py`")


def _command_lines():
    """(page, command, its arguments) for each `looprl COMMAND ...` in the docs' code."""
    for page in doc_pages():
        for snippet in code_snippets(page.read_text()):
            for match in re.finditer(r"looprl (\w+)([^#|;]*)", snippet):
                if match[1] in COMMANDS:
                    yield page.relative_to(ROOT), match[1], match[2].split("looprl ")[0]


def test_every_flag_a_documented_command_line_passes_exists():
    wrong = set()
    for page, command, arguments in _command_lines():
        for flag in re.findall(r"(?<![\w-])--[a-z][\w.-]*[\w]", arguments):
            if command == "rl" and flag not in command_flags("rl"):
                # `looprl rl` takes dotted config overrides; `--key.sub` is the synopsis' placeholder
                ok = flag == "--key.sub" or config_key_exists(flag[2:])
            else:
                ok = flag in command_flags(command)
            if not ok:
                wrong.add(f"{page}: looprl {command} {flag}")
    assert not wrong, sorted(wrong)


_TABLES = "|".join(RLConfig.model_fields)
_KEY_SPAN = re.compile(rf"\[?((?:{_TABLES})(?:\.[\w{{}},|=<>.\"]+)?)\]?(?: = .*)?")


def _keys(span: str) -> list[str]:
    """The config keys a code span names: `trainer.lora.rank`, `log.level = "DEBUG"`, `[trainer.lora]`,
    `trainer.optim.{lr,betas}` (two keys), `trainer.loss.{ratio.type=truncated|clipped}`."""
    match = _KEY_SPAN.fullmatch(span)
    if re.search(r"\.(log|json|toml|py|db)$", span):  # a file: `trainer.log`
        return []
    if not match or ("." not in match[1] and not span.startswith("[")):
        return []
    head, brace, rest = match[1].partition(".{")
    if not brace:
        return [match[1].split("=")[0].split(".<")[0]]
    return [f"{head}.{alt.split('=')[0]}" for alt in rest.rstrip("}").split(",")]


def test_every_config_key_the_docs_name_exists():
    wrong = {f"{page.relative_to(ROOT)}: {key}" for page in doc_pages()
             for span in re.findall(r"`([^`\n]+)`", page.read_text()) for key in _keys(span)
             if not config_key_exists(key)}
    assert not wrong, sorted(wrong)
