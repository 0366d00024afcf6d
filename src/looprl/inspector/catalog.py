"""The runs the inspector serves: read-only store readers per RUN_DIR, and ids for their runs.

Each run gets an id unique across the directories given on the command line, derived from the
directory's name (`runs/demo-eval` -> `demo-eval`, a second `other/demo-eval` -> `demo-eval-2`); a
directory holding several runs names its later ones `{dir}~{run_id}`. Runs are listed afresh on every
request, so runs started after the inspector appear without a restart.

Each of the server's worker threads reads through connections of its own (a store reader, and a plain
read-only connection for the inspector's own queries in `looprl.inspector.queries`), opened on its first
request: SQLite serves concurrent readers, so a slow query (a 1-2 character search scans the rows the
other filters select) holds up only its own request, never the rest of the inspector.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from looprl.paths import db_path
from looprl.store.reader import RunStoreReader
from looprl.store.records import RunInfo

_Opened = TypeVar("_Opened", RunStoreReader, sqlite3.Connection)


@dataclass
class RunRef:
    """Where one run lives: its inspector id, the store's run id, and the source directory."""

    id: str
    run_id: str
    source: RunSource


class RunSource:
    """One RUN_DIR: a reader and a connection per worker thread."""

    def __init__(self, run_dir: Path, slug: str) -> None:
        self.run_dir = Path(run_dir)
        self.slug = slug
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[RunStoreReader | sqlite3.Connection] = []
        self._own_reader()  # an unreadable RUN_DIR is an error at startup, not on the first request

    @contextmanager
    def reader(self) -> Iterator[RunStoreReader]:
        yield self._own_reader()

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection to the store, this thread's own."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{db_path(self.run_dir)}?mode=ro", uri=True, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = self._track(conn)
        yield conn

    def _own_reader(self) -> RunStoreReader:
        reader = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = self._track(RunStoreReader(self.run_dir))
        return reader

    def _track(self, opened: _Opened) -> _Opened:
        with self._lock:
            self._open.append(opened)
        return opened

    def runs(self) -> list[tuple[str, RunInfo]]:
        """`(inspector id, run)` for every run in the store, oldest first."""
        with self.reader() as r:
            runs = r.runs()
        return [(self.slug if i == 0 else f"{self.slug}~{_slug(run.run_id)}", run) for i, run in enumerate(runs)]

    def close(self) -> None:
        with self._lock:
            for opened in self._open:
                opened.close()
            self._open.clear()


class RunCatalog:
    """Every run of every RUN_DIR, by inspector id."""

    def __init__(self, run_dirs: list[Path]) -> None:
        self.sources: list[RunSource] = []
        taken: set[str] = set()
        for run_dir in run_dirs:
            base = _slug(Path(run_dir).resolve().name) or "run"
            slug, n = base, 1
            while slug in taken:
                n += 1
                slug = f"{base}-{n}"
            taken.add(slug)
            self.sources.append(RunSource(run_dir, slug))

    def runs(self) -> list[tuple[RunRef, RunInfo]]:
        return [(RunRef(rid, run.run_id, source), run) for source in self.sources for rid, run in source.runs()]

    def find(self, run_id: str) -> RunRef | None:
        """The run with this inspector id, or None."""
        slug = run_id.split("~", 1)[0]
        for source in self.sources:
            if source.slug == slug:
                for rid, run in source.runs():
                    if rid == run_id:
                        return RunRef(rid, run.run_id, source)
        return None

    def close(self) -> None:
        for source in self.sources:
            source.close()


def _slug(text: str) -> str:
    """Letters, digits, `.`, `_` and `-` only: safe in a URL path segment."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
