"""verifiers environments on looprl: `vf:ENV_ID` (or a Hub id, `vf:owner/name@version`).

verifiers 0.4 ships only `verifiers.v1`: an env is a package exporting a `Taskset`, run by an `Env`
whose harness is a separate process (`v1_env` adapts these). Up to 0.3.x an env package exports the
classic `load_environment(**kwargs) -> vf.Environment` (`classic` adapts those). Which one a spec
loads follows the installed verifiers' version: the two lines cannot share a venv (0.4 pins
`openai<3` and `mcp==2.0.0`), so the installed one is the one the user's envs are written for.
"""

from __future__ import annotations

import re
from importlib import metadata

from looprl.envs.environment import Environment
from looprl.errors import UserError

SPEC_PREFIX = "vf:"
V1_LINE = (0, 4)
"""The first verifiers release whose envs are `verifiers.v1` tasksets (it removed the classic API)."""


def is_verifiers_spec(spec: str) -> bool:
    return spec.startswith(SPEC_PREFIX)


def short_name(env_id: str) -> str:
    """The name a Hub id installs as (`owner/name@version` -> `name`): what logs and the store show."""
    return env_id.rsplit("/", 1)[-1].split("@", 1)[0]


def installed_line() -> tuple[int, int]:
    """The installed verifiers' (major, minor); a `UserError` when verifiers is not installed."""
    try:
        version = metadata.version("verifiers")
    except metadata.PackageNotFoundError:
        raise UserError("vf: environments need verifiers: pip install 'looprl[verifiers]' (the 0.4 line), "
                        "or 'verifiers>=0.3,<0.4' for envs written against the classic API") from None
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    return major, minor


def env_class(env_id: str) -> type[Environment]:
    """A looprl environment class for the installed verifiers env package `env_id`: a `verifiers.v1`
    taskset under verifiers >= 0.4, a classic `load_environment` env under 0.3.x."""
    if installed_line() >= V1_LINE:
        from looprl.interop.verifiers import v1_env

        return v1_env.env_class(env_id)
    from looprl.interop.verifiers import classic

    return classic.env_class(env_id)
