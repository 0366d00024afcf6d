"""Start the embedded engine as a child process, for commands that need a model server.

`looprl eval` without `--base-url` (and `looprl rl` on CPU) use this to run `looprl inference` in its
own process, wait until it answers `/health`, talk to it over HTTP, and stop it afterwards::

    from looprl.inference.process import EngineProcess

    with EngineProcess("smollm2-135m-instruct", log_path=run_dir / "logs" / "inference.log") as engine:
        client = openai.OpenAI(base_url=engine.base_url, api_key="looprl")
        client.chat.completions.create(model=engine.model_name, messages=[...])

    async with EngineProcess(model, log_path=None) as engine:  # the same, from async code
        ...

API:

- `EngineProcess(model=DEFAULT_MODEL, log_path=None, port=None, host="127.0.0.1",
  startup_timeout=600.0, extra_args=(), served_model_name=None, secret=None,
  weights_dirs=())`: nothing starts until `start()` /
  `with` / `async with`. `model` is an alias, local directory or Hub id (see `looprl.model_loading`).
  `port=None` picks a free port. `log_path=None` logs to a temporary file (deleted on stop).
  `extra_args` are appended to the `looprl inference` command line (e.g. `["--max-batch-size", "32"]`).
  `secret`: the run secret the engine then requires on every route but `/health`, handed over in its
  environment (`LOOPRL_RUN_SECRET`), never on its command line; `weights_dirs`: the directories
  `/update_weights` may load from (none: it loads nothing).
- `.base_url`: `http://HOST:PORT/v1`, what an OpenAI client takes; `.url`: the server root
  (`/health`, `/update_weights`); `.model_name`: the name to put in requests
  (`served_model_name`, default `model`); `.process`: the running `subprocess.Popen` (or None);
  `.log_path`: where the child's output goes.
- `start()` launches the child and blocks until `/health` answers; `await astart()` is the async
  form. If the child exits first, or `startup_timeout` passes, they raise `EngineStartError` (a
  `UserError`) with the exit status and the last lines of the log.
- `stop()` terminates the child (SIGTERM, then SIGKILL after 10 s); called on leaving the context.
- `serve_foreground()` runs the server with its output on this process's, until it exits (`looprl
  inference --backend vllm`, `python -m looprl.inference` on a SLURM node).
- Subclasses run another server the same way by overriding `command()` and `environment()`
  (`looprl.inference.vllm.launch.VllmProcess`); `own_process_group` makes `stop()` signal the
  child's whole process group. `looprl.inference.backends.engine_process` picks the class.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

from looprl.errors import UserError
from looprl.handoff.engine_access import SECRET_ENV
from looprl.model_loading import DEFAULT_MODEL

LOG_TAIL_LINES = 30


class EngineStartError(UserError):
    """The engine process exited, or did not become healthy, before serving."""


class EngineProcess:
    engine_name = "inference engine"
    own_process_group = False
    """Run the child in its own process group and signal the whole group on `stop()` (for servers that
    start processes of their own)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        log_path: Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 600.0,
        extra_args: Sequence[str] = (),
        served_model_name: str | None = None,
        secret: str | None = None,
        weights_dirs: Sequence[Path] = (),
    ) -> None:
        self.model, self.model_name = model, served_model_name or model
        self.secret, self.weights_dirs = secret, [Path(d) for d in weights_dirs]
        self.host, self.port = host, port or _free_port(host)
        self.startup_timeout, self.extra_args = startup_timeout, list(extra_args)
        self.log_path, self._owns_log = (log_path, False) if log_path else (_temp_log(), True)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The child process while it runs (for supervisors that poll it), else None."""
        return self._process

    def start(self) -> EngineProcess:
        self._launch()
        deadline = time.monotonic() + self.startup_timeout
        while not self._healthy():
            self._check_alive(deadline)
            time.sleep(0.25)
        return self

    async def astart(self) -> EngineProcess:
        self._launch()
        deadline = time.monotonic() + self.startup_timeout
        while not await asyncio.to_thread(self._healthy):
            self._check_alive(deadline)
            await asyncio.sleep(0.25)
        return self

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._process.wait()
        if self._process is not None and self.own_process_group:
            self._signal(signal.SIGKILL)  # whatever the child left behind, even if it exited on its own
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._owns_log:
            self.log_path.unlink(missing_ok=True)

    def serve_foreground(self) -> int:
        """Run the server here until it exits or Ctrl-C; its exit status (130 on Ctrl-C)."""
        try:
            return subprocess.call(self.command(), env=self.environment())
        except KeyboardInterrupt:
            return 130
        finally:
            self.stop()

    def __enter__(self) -> EngineProcess:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> EngineProcess:
        try:
            return await self.astart()
        except BaseException:
            self.stop()
            raise

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)

    def command(self) -> list[str]:
        """The child's command line (`looprl inference`; `VllmProcess` runs vLLM's server instead)."""
        weights = [arg for d in self.weights_dirs for arg in ("--weights-dir", str(d))]
        return [sys.executable, "-m", "looprl.cli", "inference", "--model", self.model, "--served-model-name",
                self.model_name, "--host", self.host, "--port", str(self.port), *weights, *self.extra_args]

    def environment(self) -> dict[str, str]:
        """The child's environment: the run secret, if any, is the only one it gets (`SECRET_ENV`)."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        env.pop(SECRET_ENV, None)
        return {**env, SECRET_ENV: self.secret} if self.secret else env

    def _launch(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (the child writes to it until stop() closes it)
        self._process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.environment(),
                                         start_new_session=self.own_process_group)

    def _signal(self, signum: int) -> None:
        assert self._process is not None
        if self.own_process_group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signum)
        else:
            self._process.send_signal(signum)

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def _check_alive(self, deadline: float) -> None:
        assert self._process is not None
        status = self._process.poll()
        if status is None and time.monotonic() < deadline:
            return
        what = (f"exited with status {status}" if status is not None
                else f"was not healthy after {self.startup_timeout:.0f} s")
        tail, where = _tail(self.log_path), "its log" if self._owns_log else str(self.log_path)
        self.stop()
        raise EngineStartError(f"the {self.engine_name} ({self.model}) {what}; last lines of {where}:\n{tail}")


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _temp_log() -> Path:
    fd, name = tempfile.mkstemp(prefix="looprl-inference-", suffix=".log")
    os.close(fd)
    return Path(name)


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])
