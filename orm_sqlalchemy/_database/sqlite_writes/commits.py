"""Commits to a SQLite file by other connections, of this process or another.

SQLite has no LISTEN: a runner or relay in another process (``neverlost worker`` beside the
app) would find new work only at its poll interval, a second by default. ``PRAGMA
data_version`` on a connection changes when any other connection commits to the file (the
count of commits is not told: several between two reads move it once); reading it takes no
lock and about 5 µs, so an idle waiter reads it every ``WATCH_INTERVAL_S`` on a connection of
its own, on the event loop, and stops waiting once it moved. A commit to another table of the
file moves it too: the waiter then looks and finds nothing, at most once an interval, and only
while idle.

The store's own engine's commits move it as well, and a waiter woken by them claims for
nothing (measured: a runner whose job settled while it waited made one empty claim per settle,
lease heartbeat or relay mark that came in during a wait). Every commit of the engine's gated
transactions falls inside one of its write turns (``turns.SQLiteWriterGate``), and during a
turn no other writer of a neverlost engine commits (the turn holds the lock between processes
too). So from a wait on, the watch reads the version as each turn begins (a change since
the last read is another connection's) and as it ends (what changed meanwhile is the engine's
own): two reads a turn, during a wait and for ``SPARE_TURNS`` turns after one, none after. A
writer that bypasses the lock file (another tool on the file, ``engine.begin()`` outside the
gate) may commit during a turn and be taken for the engine: it is then seen at the poll
interval instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

from sqlalchemy.ext.asyncio import AsyncEngine

from .turns import SQLiteWriterGate, writer_gate

__all__ = ["WATCH_INTERVAL_S", "SQLiteCommits", "sqlite_commits"]

WATCH_INTERVAL_S = 0.05

SPARE_TURNS = 16
"""Turns of the engine after a wait that the watch still reads around (a claim that took jobs,
their settles, a relay's marks: the commits that come before the next wait); past them, a store
too busy to wait pays nothing and the next wait may end once for its own commits."""


class SQLiteCommits:
    """Watches the SQLite file at ``path`` for commits made through other connections than
    those of ``gate``'s engine (all of them without a gate)."""

    def __init__(self, path: str, gate: SQLiteWriterGate | None = None) -> None:
        self._path = path
        self._gate = gate
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._seen: int | None = None
        self._changes = 0
        self._acked = 0
        self._waits = 0
        self._spare_turns = 0
        self._watching = False
        self._in_turn = False

    async def wait(self, woken: asyncio.Event, timeout_s: float) -> None:
        """Until ``woken`` is set, another connection commits, or ``timeout_s`` passed.

        The version is read after each interval and compared with the last one read (by any
        wait of this watch, or a turn), not read up front: a wait woken at once pays no read,
        and a commit by another connection made between two waits still ends the next one.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        acked = self._acked
        self._begin_wait()
        try:
            while not woken.is_set():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(remaining, WATCH_INTERVAL_S)):
                        await woken.wait()
                if woken.is_set():
                    return
                self._look()
                if self._changes != acked:
                    return
        finally:
            self._end_wait()

    def turn_began(self) -> None:
        """The engine's write turn is held: what moved since the last read is another's."""
        if self._waits == 0:
            if self._spare_turns == 0:
                self._in_turn = False
                return
            self._spare_turns -= 1
        self._in_turn = True
        self._look()

    def turn_ending(self) -> None:
        """The engine's turn ends: what moved during it is the engine's own commit."""
        if not self._in_turn:
            return
        self._in_turn = False
        version = self._read()
        if version is None:
            self._changes += 1  # cannot tell: let the waiter look
        else:
            self._seen = version

    async def close(self) -> None:
        self._closed = True
        if self._gate is not None and self._watching:
            self._gate.unwatch(self)
            self._watching = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _begin_wait(self) -> None:
        self._waits += 1
        self._spare_turns = SPARE_TURNS
        if self._gate is not None and not self._watching and not self._closed:
            self._gate.watch(self)
            self._watching = True

    def _end_wait(self) -> None:
        self._waits -= 1
        self._acked = self._changes  # the waiter looks next

    def _look(self) -> None:
        """Read the version; count a change from the last one read (None when it cannot be
        read: then only the timeout and ``woken`` end a wait)."""
        version = self._read()
        if version is None:
            return
        if self._seen is not None and version != self._seen:
            self._changes += 1
        self._seen = version

    def _read(self) -> int | None:
        """On the event loop: the read takes microseconds and never waits (no busy timeout;
        a busy file reads as None)."""
        if self._closed:
            return None
        try:
            if self._connection is None:
                self._connection = sqlite3.connect(
                    self._path, timeout=0, check_same_thread=False, isolation_level=None
                )
            row = self._connection.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return None
        return int(row[0])


def sqlite_commits(engine: AsyncEngine) -> SQLiteCommits | None:
    """A watch of the file a SQLite engine's database names, leaving out the engine's own
    commits; None for an in-memory database."""
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return SQLiteCommits(database, writer_gate(engine))
