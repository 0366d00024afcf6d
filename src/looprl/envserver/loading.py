"""Loading an environment class from `path/to/file.py:ClassName` or `package.module:ClassName`.

The spec is a plain string so it can cross process boundaries (env workers load it themselves).
Every mistake is a `UserError` naming what was wrong: a missing file, a module that fails to import
(with its own error), a missing class, or a class that is not an environment.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from looprl.envs.environment import Environment
from looprl.errors import UserError
from looprl.utils.logger import get_logger


def _split(spec: str) -> tuple[str, str]:
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise UserError(f"bad environment {spec!r}: expected 'path/to/file.py:ClassName' or 'package.module:ClassName'")
    return target, name


def _module_name(path: Path) -> str:
    """The file's stem, as a script's own imports would name it (and `logging.getLogger(__name__)`
    shows it), unless another module already holds that name: then a name unique to the path."""
    loaded = sys.modules.get(path.stem)
    if loaded is None or Path(getattr(loaded, "__file__", None) or "").resolve() == path.resolve():
        return path.stem
    return f"looprl_env_{path.stem}_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"environment file not found: {path}")
    module_name = _module_name(path)
    if module_name in sys.modules:
        return sys.modules[module_name]
    if str(path.parent.resolve()) not in sys.path:
        sys.path.insert(0, str(path.parent.resolve()))  # so the env can import its sibling modules
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[module_name]
        raise UserError(f"importing {path} failed: {type(e).__name__}: {e}") from e
    return module


def load_env_class(spec: str) -> type[Environment]:
    """The environment class a spec names; a benchmax env comes wrapped in `looprl.interop.benchmax`'s adapter."""
    from looprl.interop import verifiers
    from looprl.interop.benchmax import adapter, finder

    if verifiers.is_verifiers_spec(spec):
        return verifiers.env_class(_verifiers_id(spec))
    finder.install()  # `import benchmax` finds looprl's compatibility layer when no real benchmax is installed
    target, name = _split(spec)
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _import_file(Path(target))
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise UserError(f"cannot import module {target!r} for environment {spec!r}: {e}") from e
    cls = getattr(module, name, None)
    if cls is None:
        raise UserError(f"{target} has no attribute {name!r}")
    if finder.used():
        get_logger().warning("{}: benchmax is not installed (it needs Python 3.12), so its imports are served by "
                             "looprl's compatibility layer", spec)
    if adapter.is_benchmax_env(cls):
        cls = adapter.adapt(cls)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise UserError(f"{spec} is not an environment: subclass looprl.envs.BaseEnv (or Environment)")
    return cls


def _verifiers_id(spec: str) -> str:
    env_id = spec.partition(":")[2]
    if not env_id:
        raise UserError(f"bad environment {spec!r}: expected 'vf:ENV_ID' (or 'vf:owner/name@version'), "
                        "an installed verifiers environment")
    return env_id


def env_name(spec: str) -> str:
    """A short name for logs and the store: the class name (a verifiers env: its id, without a Hub owner or version)."""
    from looprl.interop.verifiers import short_name

    return short_name(_verifiers_id(spec)) if spec.startswith("vf:") else _split(spec)[1]


def parse_env_args(text: str | None) -> dict[str, Any]:
    """`--env-args` JSON: an object of constructor keyword arguments."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"--env-args is not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(value, dict):
        raise UserError(f"--env-args must be a JSON object, got {type(value).__name__}")
    return value


def instantiate(cls: type[Environment], args: dict[str, Any]) -> Environment:
    try:
        return cls(**args)
    except TypeError as e:
        raise UserError(f"cannot construct {cls.__name__} with env args {args}: {e}") from e


def default_base_dir(spec: str) -> Path:
    """`data/` beside the env file when it exists, else the file's folder (module and verifiers specs: the cwd)."""
    if spec.startswith("vf:"):
        return Path.cwd()
    target, _ = _split(spec)
    if target.endswith(".py") or "/" in target:
        folder = Path(target).resolve().parent
    else:
        module = importlib.util.find_spec(target.split(".")[0])
        origin = getattr(module, "origin", None) if module else None
        folder = Path(origin).parent if origin else Path.cwd()
    return folder / "data" if (folder / "data").is_dir() else folder
