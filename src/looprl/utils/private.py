"""What looprl keeps to the user who runs it: secrets off the command line, run files owner-only.

Secrets (an API key, the inspector's token) come from an environment variable or a file, never from an
argument a process is started with: every user of a machine can read every process's command line
(`ps`, `/proc/PID/cmdline`). A flag that takes the secret itself still works, with a warning saying so
(`read_secret`). Once read, a secret is a `pydantic.SecretStr`, which every dump of a config (the run
store, `config.toml`, a tracker, a log) writes as `**********`; only the code that sends it unwraps it.

`make_files_private` sets the process's umask to 077 (keeping any stricter bits), which every child
process inherits: the run directories and every file looprl, its children and the libraries they call
(SQLite, torch, safetensors, trackers) create are 0700 / 0600. A directory with a default ACL overrides
the umask for what is created in it, which is how a team shares a runs directory or a model cache on
purpose (`setfacl -d -m g:team:rx runs/`), and `chmod -R g+rX RUN_DIR` shares one run afterwards.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from pydantic import SecretStr

from looprl.errors import UserError

PRIVATE = 0o077
"""Permission bits the umask always removes: everything for group and others."""


def make_files_private() -> None:
    """Create files 0600 and directories 0700 from now on, in this process and the ones it starts."""
    os.umask(os.umask(PRIVATE) | PRIVATE)


def read_secret(*, value: str | None, flag: str, file: Path | None, file_flag: str, env: str) -> SecretStr | None:
    """The secret from `file` (`file_flag`), else `value` (given as `flag`, with a warning on stderr: it is
    in the process list), else the environment variable `env`; None when none is set."""
    if file is not None:
        return SecretStr(_read_file(file, file_flag))
    if value is not None:
        print(f"warning: {flag} puts the secret on the command line, where every user of this machine can read "
              f"it (ps); set {env} or pass {file_flag} FILE instead", file=sys.stderr)
        return SecretStr(value)
    from_env = os.environ.get(env)
    return SecretStr(from_env) if from_env else None


def _read_file(file: Path, file_flag: str) -> str:
    try:
        text = file.read_text().strip()
        mode = file.stat().st_mode
    except OSError as e:
        raise UserError(f"{file_flag} {file}: {e.strerror or e}") from None
    if not text:
        raise UserError(f"{file_flag} {file} is empty")
    if stat.S_IMODE(mode) & PRIVATE:
        print(f"warning: {file_flag} {file} can be read by other users; chmod 600 it", file=sys.stderr)
    return text
