"""Who may talk to a run's inference engine, and which weights it may be told to load.

    secret = create_run_secret(run_dir)            # `looprl rl`, before it starts any process
    engine env:        LOOPRL_RUN_SECRET=secret     # SECRET_ENV; never argv, a log, config.toml or the store
    orchestrator env:  LOOPRL_RUN_SECRET=secret     # it sends `Authorization: Bearer <secret>`
    authorised(request.headers.get("authorization"), secret)   # the engine, on every route but /health
    inside(body.path, weights_dirs)                # the engine: a path to load must resolve in the run

The run secret is random (`secrets.token_urlsafe`), or `$LOOPRL_RUN_SECRET` when the user set it (to
share one secret with engines started by hand, `inference.urls`); it is written once to
`{output_dir}/run_secret` (mode 0600) so a SLURM job's nodes can read it from the shared filesystem
and a user can reach the engine with `curl`. Engines compare it in constant time. A weight update
names a directory; the engine loads it only if it resolves (symlinks followed) inside one of the
directories it was started with: the run's `broadcasts/`, and its shared-memory region directory.

Plain standard library: the launcher, the orchestrator and the embedded engine import it.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from looprl.errors import UserError
from looprl.paths import secret_path
from looprl.utils.net import is_loopback

SECRET_ENV = "LOOPRL_RUN_SECRET"
"""The environment variable that carries the run secret to the processes that need it."""


def create_run_secret(run_dir: Path) -> str:
    """The run's secret: `$LOOPRL_RUN_SECRET` if set, else the one in the run's secret file (a resumed run),
    else a new random one; written to the secret file (mode 0600) unless it already holds it."""
    path = secret_path(run_dir)
    secret = os.environ.get(SECRET_ENV) or (path.read_text().strip() if path.is_file() else secrets.token_urlsafe(32))
    if not path.is_file() or path.read_text().strip() != secret:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # a new file, so the mode below is the file's whatever was there
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
    return secret


def take_run_secret() -> str | None:
    """The run secret from this process's environment, removed from it, so that no process this one starts
    (the orchestrator's env servers, which run user code) inherits it."""
    return os.environ.pop(SECRET_ENV, None) or None


def authorised(authorization: str | None, secret: str | None) -> bool:
    """Whether an `Authorization` header carries `secret` as a bearer token (always, when there is no secret)."""
    if not secret:
        return True
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), secret.encode())


def inside(path: str | Path, roots: Iterable[str | Path]) -> Path | None:
    """`path` resolved (symlinks followed) if it lies inside one of `roots` (resolved too), else None."""
    resolved = Path(path).expanduser().resolve()
    return resolved if any(resolved.is_relative_to(Path(root).resolve()) for root in roots) else None


def check_engine_bind(host: str, secret: str | None) -> None:
    """Refuse to serve an engine on a non-loopback address without the run secret."""
    if not is_loopback(host) and not secret:
        raise UserError(f"--host {host} would let anyone on the network use the engine and replace its weights; "
                        f"set {SECRET_ENV} (the run secret every request must then carry as `Authorization: "
                        "Bearer`), or bind 127.0.0.1")
