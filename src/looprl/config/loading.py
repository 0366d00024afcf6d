"""Loading a pydantic config from TOML files and dotted command-line overrides.

    looprl rl @ base.toml @ small.toml --max_steps 2 --orchestrator.group_size 4

`@ FILE` arguments are read in order and deep-merged left to right (a later file overrides only the
keys it sets); `--a.b.c VALUE` overrides come last, in order. A value is read as a TOML literal when
it is one (`2`, `true`, `[1, 2]`, `"x"`), else as a plain string. The merged table is validated by
the config model, whose models forbid unknown keys: every error names the key path
(`orchestrator.group_size: Input should be greater than 0`), and an unknown key the closest known one
(`orchestrator.sampling.temprature: Extra inputs are not permitted (did you mean temperature?)`).
No torch in here: `--help` stays fast.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import tomllib
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from looprl.errors import UserError

M = TypeVar("M", bound=BaseModel)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in: tables merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_value(raw: str) -> Any:
    """A TOML literal, else a JSON object or array (`--env.args '{"max_turns": 2}'`), else the plain string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    if raw.lstrip().startswith(("{", "[")):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(raw)
    return raw


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"config file {path}: {e}") from None


def merge_arguments(argv: Sequence[str]) -> dict[str, Any]:
    """The table that `@ FILE ...` and `--dotted.key VALUE ...` arguments describe."""
    table: dict[str, Any] = {}
    items = list(argv)
    while items:
        arg = items.pop(0)
        if arg == "@" or arg.startswith("@"):
            path = arg[1:] or (items.pop(0) if items else "")
            if not path:
                raise UserError("'@' must be followed by a TOML file")
            table = deep_merge(table, read_toml(Path(path)))
        elif arg.startswith("--"):
            key, sep, raw = arg[2:].partition("=")
            if not sep:
                if not items:
                    raise UserError(f"--{key} needs a value")
                raw = items.pop(0)
            override: dict[str, Any] = {}
            node = override
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = parse_value(raw)
            table = deep_merge(table, override)
        else:
            raise UserError(f"unexpected argument {arg!r}: expected '@ FILE.toml' or '--key VALUE'")
    return table


def validate(model: type[M], table: dict[str, Any]) -> M:
    """`model` from `table`; validation errors become one `UserError` naming each key path."""
    try:
        return model.model_validate(table)
    except ValidationError as e:
        lines = [f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}{_did_you_mean(model, err)}"
                 for err in e.errors()]
        raise UserError("invalid configuration:\n  " + "\n  ".join(lines)) from None


def _did_you_mean(model: type[BaseModel], err: Any) -> str:
    """` (did you mean temperature?)` for an unknown key close to a field of the table it is in."""
    if err["type"] != "extra_forbidden":
        return ""
    *table, key = err["loc"]
    close = difflib.get_close_matches(str(key), _field_names(model, table), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _field_names(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The keys the table at `loc` accepts: fields of the models there (a union's members, an optional's
    model), following each key; a key that is no field (a union's tag in the error path) is skipped."""
    models = [model]
    for key in loc:
        fields = [m.model_fields[key] for m in models if key in m.model_fields]
        if fields:
            models = [t for f in fields for t in _models_in(f.annotation)]
    return sorted({name for m in models for name in m.model_fields})


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []


def load_config(model: type[M], argv: Sequence[str]) -> M:
    return validate(model, merge_arguments(argv))
