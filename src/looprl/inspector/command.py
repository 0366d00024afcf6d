"""`looprl inspect RUN_DIR [RUN_DIR ...]`: serve the rollout inspector for one or more run directories.

Binds 127.0.0.1 by default. Any other address exposes transcripts and logs to the network, so it needs
an access token (`LOOPRL_INSPECTOR_TOKEN`, `--token-file`, or `--token`, which warns: a flag is in the
process list): without one the command exits at once. The token is never printed: the user chose it, and
what the command prints often lands in a log file (nohup, tmux, a SLURM job's output). The port is bound
before anything is printed, so a busy port is a one-line error, not a banner followed by a server's
traceback.
"""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path

from looprl.errors import UserError

TOKEN_ENV = "LOOPRL_INSPECTOR_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories (each holds looprl.db)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need a token)")
    parser.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    parser.add_argument("--token-file", type=Path, metavar="FILE",
                        help=f"file holding the access token every request must carry (default: ${TOKEN_ENV})")
    parser.add_argument("--token", help=f"the token itself: visible to every user in `ps`, prefer ${TOKEN_ENV}")


def run(args: argparse.Namespace) -> int:
    from looprl.inspector.security import check_bind
    from looprl.utils.private import read_secret

    secret = read_secret(value=args.token, flag="--token", file=args.token_file, file_flag="--token-file",
                         env=TOKEN_ENV)
    token = secret.get_secret_value() if secret else None
    check_bind(args.host, token)
    for run_dir in args.run_dirs:
        if not run_dir.is_dir():
            raise UserError(f"{run_dir} is not a directory")

    import uvicorn

    from looprl.inspector.app import create_app

    app = create_app(args.run_dirs, token=token, host=args.host)
    sock = listen(args.host, args.port)
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    print(f"looprl inspector on {url}  (Ctrl+C to stop)", flush=True)
    if token:
        print(f"it asks for the token: open {url}?token=YOUR_TOKEN once (a cookie keeps you signed in)", flush=True)
    with sock:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    return 0


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port`, or a `UserError` saying why it can't be."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is in use; pass --port") from None
        raise UserError(f"cannot listen on {host} port {port}: {e.strerror or e}") from None
