"""Commits to a SQLite file by other connections, of this process or another.

SQLite has no LISTEN: a runner or relay in another process (``neverlost worker`` beside the
app) would find new work only at its poll interval, a second by default. ``PRAGMA
data_version`` changes when any other connection commits to the file; reading it takes no lock
and microseconds, so an idle waiter reads it every ``WATCH_INTERVAL_S`` on a connection of its
own and stops waiting once it moved. A commit to another table of the file moves it too: the
waiter then looks and finds nothing, at most once an interval, and only while idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

__all__ = ["WATCH_INTERVAL_S", "SQLiteCommits", "sqlite_commits"]

WATCH_INTERVAL_S = 0.05


class SQLiteCommits:
    """Watches the SQLite file at ``path`` for commits made through other connections."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._connection: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._seen: int | None = None

    async def wait(self, woken: asyncio.Event, timeout_s: float) -> None:
        """Until ``woken`` is set, another connection commits, or ``timeout_s`` passed.

        The version is read after each interval and compared with the one this wait started
        from (the last one read, by any wait of this watch), not read up front: a wait woken
        at once pays no thread hop, and a commit made between two waits still ends the next
        one. The store's own commits move it too, so a wait after the store wrote may end
        after one interval for nothing.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        seen = self._seen
        while not woken.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, WATCH_INTERVAL_S)):
                    await woken.wait()
            if woken.is_set():
                return
            version = await self._version()
            if version is None:
                continue
            self._seen = version
            if seen is not None and version != seen:
                return
            seen = version

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _version(self) -> int | None:
        """The file's data_version; None when it cannot be read (then only the timeout and
        ``woken`` end a wait)."""
        async with self._lock:
            if self._closed:
                return None
            try:
                return await asyncio.to_thread(self._read)
            except sqlite3.Error:
                return None

    def _read(self) -> int:
        if self._connection is None:
            self._connection = sqlite3.connect(
                self._path, check_same_thread=False, isolation_level=None
            )
        row = self._connection.execute("PRAGMA data_version").fetchone()
        return int(row[0])


def sqlite_commits(database: str | None) -> SQLiteCommits | None:
    """A watch of the file a SQLite URL's database names; None for an in-memory database."""
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return SQLiteCommits(database)
