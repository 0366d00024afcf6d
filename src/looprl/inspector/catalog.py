"""The runs the inspector serves: read-only store readers per RUN_DIR, and ids for their runs.

Each run gets an id unique across the directories given on the command line, derived from the
directory's name (`runs/demo-eval` -> `demo-eval`, a second `other/demo-eval` -> `demo-eval-2`); a
directory holding several runs names its later ones `{dir}~{run_id}`. Runs are listed afresh on every
request, so runs started after the inspector appear without a restart.

Each request reads through connections no other request is using at the time (a store reader, or a
plain read-only connection for the inspector's own queries in `looprl.inspector.queries`), taken from a
pool that opens one more when all are busy: SQLite serves concurrent readers, so a slow query (a 1-2
character search scans the rows the other filters select) holds up only its own request, never the rest
of the inspector. A pool holds as many connections as requests ever ran at once (the server's thread
pool bounds that).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from looprl.paths import db_path
from looprl.store.reader import RunStoreReader
from looprl.store.records import RunInfo


class _Closable(Protocol):
    def close(self) -> None: ...


_Opened = TypeVar("_Opened", bound=_Closable)


@dataclass
class RunRef:
    """Where one run lives: its inspector id, the store's run id, and the source directory."""

    id: str
    run_id: str
    source: RunSource


class _Pool(Generic[_Opened]):
    """Connections of one kind, each lent to one request at a time."""

    def __init__(self, open_one: Callable[[], _Opened]) -> None:
        self._open_one = open_one
        self._lock = threading.Lock()
        self._idle: list[_Opened] = []
        self._all: list[_Opened] = []

    @contextmanager
    def lease(self) -> Iterator[_Opened]:
        with self._lock:
            item = self._idle.pop() if self._idle else None
        if item is None:
            item = self._open_one()
            with self._lock:
                self._all.append(item)
        try:
            yield item
        finally:
            with self._lock:
                self._idle.append(item)

    def close(self) -> None:
        with self._lock:
            for item in self._all:
                item.close()
            self._all.clear()
            self._idle.clear()


class RunSource:
    """One RUN_DIR: pools of readers and of plain read-only connections."""

    def __init__(self, run_dir: Path, slug: str) -> None:
        self.run_dir = Path(run_dir)
        self.slug = slug
        self._readers = _Pool(lambda: RunStoreReader(self.run_dir))
        self._conns = _Pool(self._connect)
        with self._readers.lease():  # an unreadable RUN_DIR is an error at startup, not on the first request
            pass

    def reader(self) -> AbstractContextManager[RunStoreReader]:
        """A store reader, this request's alone until the `with` block ends."""
        return self._readers.lease()

    def connection(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read-only connection to the store, this request's alone until the `with` block ends."""
        return self._conns.lease()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{db_path(self.run_dir)}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

    def runs(self) -> list[tuple[str, RunInfo]]:
        """`(inspector id, run)` for every run in the store, oldest first."""
        with self.reader() as r:
            runs = r.runs()
        return [(self.slug if i == 0 else f"{self.slug}~{_slug(run.run_id)}", run) for i, run in enumerate(runs)]

    def close(self) -> None:
        self._readers.close()
        self._conns.close()


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
