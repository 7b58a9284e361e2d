"""SQLite writers of different processes queue on the lock file beside the database.

Every engine here has SQLite's own busy timeout at 0: a writer that met SQLite's lock taken by
another process would fail with "database is locked" at once, so a write that succeeds while
the other process holds or has just held the turn waited in the lock file's queue, not in the
busy handler. The other process is ``tests.processes.sqlite_writer``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from orm_sqlalchemy import SQLAlchemyTransactionManager
from orm_sqlalchemy.engine import configure_sqlite, writer_gate
from tests.support import wait_until

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 15.0


class Child:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()

    async def heard(self, expected: str) -> None:
        assert self.process.stdout is not None
        async with asyncio.timeout(DEADLINE_S):
            line = await self.process.stdout.readline()
        assert line.decode().strip() == expected


@pytest.fixture
async def database(tmp_path: Path) -> Path:
    path = tmp_path / "shared.db"
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    configure_sqlite(engine)
    async with engine.begin() as conn:
        await conn.exec_driver_sql("CREATE TABLE log (n INTEGER NOT NULL, writer TEXT NOT NULL)")
    await engine.dispose()
    return path


@pytest.fixture
async def child(database: Path) -> AsyncIterator[Child]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.processes.sqlite_writer", str(database),
        cwd=REPO, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    writer = Child(process)
    try:
        await writer.heard("ready")
        yield writer
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _engine(path: Path, *, busy_timeout_ms: int = 10_000) -> AsyncEngine:
    """A configured engine (its writer gate waits ``busy_timeout_ms``), SQLite's own wait 0."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    configure_sqlite(engine, busy_timeout_ms=busy_timeout_ms)

    @event.listens_for(engine.sync_engine, "checkout")
    def no_busy_wait(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 0")
        cursor.close()

    return engine


async def _write(tm: SQLAlchemyTransactionManager, n: int) -> float:
    """One row in a transaction; when its BEGIN had the write lock (perf_counter)."""
    async with tm.transaction() as session:
        await session.execute(text("INSERT INTO log VALUES (:n, 'parent')"), {"n": n})
        return time.perf_counter()


async def _waiting_writer(engine: AsyncEngine) -> asyncio.Task[float]:
    """A writer of this process, once it waits for the other process's turn."""
    gate = writer_gate(engine)
    assert gate is not None
    writer = asyncio.create_task(_write(SQLAlchemyTransactionManager(engine), 1))
    await wait_until(gate.waits_for_another_process, timeout=DEADLINE_S, message="waiting")
    assert not writer.done()
    return writer


@pytest.mark.parametrize("how", ["commit", "rollback", "error"])
async def test_a_waiting_writer_has_the_lock_as_the_other_process_ends_its_transaction(
    database: Path, child: Child, how: str
) -> None:
    engine = await _engine(database)
    try:
        await child.say("hold")
        await child.heard("holding")
        writer = await _waiting_writer(engine)
        await child.say(how)
        await child.heard("released")
        released = time.perf_counter()
        acquired = await asyncio.wait_for(writer, DEADLINE_S)
        assert acquired - released < 1.0  # woken by the kernel, not after a retry's sleep
        async with engine.connect() as conn:
            rows = (await conn.exec_driver_sql("SELECT writer FROM log")).scalars().all()
        assert sorted(rows) == (["child", "parent"] if how == "commit" else ["parent"])
    finally:
        await engine.dispose()


async def test_a_killed_holder_lets_the_waiting_writer_in(database: Path, child: Child) -> None:
    engine = await _engine(database)
    try:
        await child.say("hold")
        await child.heard("holding")
        writer = await _waiting_writer(engine)
        os.kill(child.process.pid, signal.SIGKILL)
        await asyncio.wait_for(writer, DEADLINE_S)
        async with engine.connect() as conn:
            rows = (await conn.exec_driver_sql("SELECT writer FROM log")).scalars().all()
        assert rows == ["parent"]
    finally:
        await engine.dispose()


async def test_waiting_past_the_timeout_is_database_is_locked(database: Path, child: Child) -> None:
    engine = await _engine(database, busy_timeout_ms=100)
    tm = SQLAlchemyTransactionManager(engine)
    try:
        await child.say("hold")
        await child.heard("holding")
        with pytest.raises(OperationalError, match="database is locked") as caught:
            await _write(tm, 1)
        assert isinstance(caught.value.orig, sqlite3.OperationalError)
        assert "another process" in str(caught.value.orig)
        # The thread that waited is still blocked: the next writer waits for the same one.
        writer = await _waiting_writer(engine)
        await child.say("commit")
        await child.heard("released")
        await asyncio.wait_for(writer, DEADLINE_S)
        await _write(tm, 2)  # the lock was let go after the first
    finally:
        await engine.dispose()


async def test_writers_of_two_processes_take_turns(database: Path, child: Child) -> None:
    """Both processes write at once: every transaction commits, the rows interleave."""
    engine = await _engine(database)
    tm = SQLAlchemyTransactionManager(engine)
    try:
        await child.say("write 200")
        for n in range(200):
            await _write(tm, n)
        await child.heard("wrote")
        async with engine.connect() as conn:
            rows = (await conn.exec_driver_sql("SELECT writer FROM log ORDER BY rowid")).all()
        writers = [row[0] for row in rows]
        assert sorted(set(writers)) == ["child", "parent"]
        assert len(writers) == 400
        switches = sum(a != b for a, b in itertools.pairwise(writers))
        assert switches >= 2  # they overlapped: each waited for the other at least once
    finally:
        await engine.dispose()
