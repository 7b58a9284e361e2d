"""SQLite writers of one process queue in the process (the engine's writer gate), on a real file.

Transactions of the transaction manager take the write turn in arrival order; the stores' own
statement groups alternate with them; readers are not held up; nobody sleeps in SQLite's busy
handler, so even with SQLite's busy timeout at 0 no "database is locked" is reported.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loguru import logger
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager
from orm_sqlalchemy._database.sqlite_writes import SQLiteBackend, writer_lock_path
from orm_sqlalchemy._database.statements import Statement
from orm_sqlalchemy.engine import configure_sqlite, writer_gate

DEADLINE_S = 10.0


async def _engine(
    path: Path, *, busy_timeout_ms: int = 5_000, sqlite_busy_timeout_ms: int | None = None
) -> AsyncEngine:
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", pool_size=30, max_overflow=0)
    configure_sqlite(engine, busy_timeout_ms=busy_timeout_ms)
    if sqlite_busy_timeout_ms is not None:
        # After configure_sqlite's own checkout listener: SQLite itself gives up at once.
        @event.listens_for(engine.sync_engine, "checkout")
        def no_busy_wait(dbapi_connection: Any, record: Any, proxy: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {sqlite_busy_timeout_ms}")
            cursor.close()

    async with engine.begin() as conn:
        await conn.exec_driver_sql("CREATE TABLE log (n INTEGER NOT NULL, task TEXT NOT NULL)")
    return engine


async def _holding(tm: SQLAlchemyTransactionManager, entered: asyncio.Event,
                   leave: asyncio.Event) -> None:
    async with tm.transaction() as session:
        await session.execute(text("INSERT INTO log VALUES (0, 'holder')"))
        entered.set()
        await leave.wait()


async def test_transactions_get_the_write_turn_in_arrival_order(tmp_path: Path) -> None:
    engine = await _engine(tmp_path / "fifo.db")
    tm = SQLAlchemyTransactionManager(engine)
    gate = writer_gate(engine)
    assert gate is not None
    order: list[int] = []
    try:
        entered, leave = asyncio.Event(), asyncio.Event()
        holder = asyncio.create_task(_holding(tm, entered, leave))
        await asyncio.wait_for(entered.wait(), DEADLINE_S)

        async def write(n: int) -> None:
            async with tm.transaction() as session:
                # The first statement (its BEGIN IMMEDIATE) waits for the turn.
                await session.execute(text("INSERT INTO log VALUES (:n, 'writer')"), {"n": n})
                order.append(n)

        writers = []
        for n in range(1, 11):
            writers.append(asyncio.create_task(write(n)))
            await _until(functools.partial(lambda k: gate.waiting() == (0, k), n))
        assert order == []  # all of them wait for the holder's turn
        leave.set()
        await asyncio.wait_for(asyncio.gather(holder, *writers), DEADLINE_S)
        assert order == list(range(1, 11))
        async with engine.connect() as conn:
            logged = (await conn.exec_driver_sql("SELECT n FROM log WHERE n > 0 ORDER BY rowid"))
            assert [row[0] for row in logged] == list(range(1, 11))
    finally:
        await engine.dispose()


async def test_concurrent_writers_never_meet_the_busy_handler(tmp_path: Path) -> None:
    """20 tasks x 20 transactions, SQLite's busy timeout 0: without queueing in the process,
    SQLite would report "database is locked" as soon as two of them overlap."""
    engine = await _engine(tmp_path / "busy.db", sqlite_busy_timeout_ms=0)
    tm = SQLAlchemyTransactionManager(engine)

    async def write(task: int) -> None:
        for n in range(20):
            async with tm.transaction() as session:
                await session.execute(
                    text("INSERT INTO log VALUES (:n, :task)"), {"n": n, "task": str(task)}
                )
                await asyncio.sleep(0)  # let the others pile up on the turn meanwhile

    try:
        await asyncio.wait_for(asyncio.gather(*(write(t) for t in range(20))), DEADLINE_S * 3)
        async with engine.connect() as conn:
            count = (await conn.exec_driver_sql("SELECT count(*) FROM log")).scalar_one()
        assert count == 400
    finally:
        await engine.dispose()


async def test_a_reader_is_not_held_up_by_a_waiting_writer(tmp_path: Path) -> None:
    engine = await _engine(tmp_path / "read.db")
    tm = SQLAlchemyTransactionManager(engine)
    try:
        entered, leave = asyncio.Event(), asyncio.Event()
        holder = asyncio.create_task(_holding(tm, entered, leave))
        await asyncio.wait_for(entered.wait(), DEADLINE_S)
        waiting = asyncio.create_task(_holding(tm, asyncio.Event(), asyncio.Event()))
        await asyncio.sleep(0)
        async with engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="DEFERRED")
            count = await asyncio.wait_for(
                conn.exec_driver_sql("SELECT count(*) FROM log"), DEADLINE_S
            )
            assert count.scalar_one() == 0  # WAL: the holder's row is not committed yet
        assert not waiting.done()
        leave.set()
        await asyncio.wait_for(holder, DEADLINE_S)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    finally:
        await engine.dispose()


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while not condition():  # noqa: ASYNC110 - the gate has no event to wait on
            await asyncio.sleep(0.001)


async def test_store_groups_and_transactions_alternate(tmp_path: Path) -> None:
    engine = await _engine(tmp_path / "policy.db")
    gate = writer_gate(engine)
    assert gate is not None
    order: list[str] = []
    try:
        held = await gate.acquire()

        async def take(name: str, *, store: bool) -> None:
            async with gate.turn(store=store):
                order.append(name)

        tasks = []
        for n, (name, store) in enumerate(
            [("app 1", False), ("app 2", False), ("app 3", False), ("store 1", True)]
        ):
            tasks.append(asyncio.create_task(take(name, store=store)))
            expected = (1, 3) if store else (0, n + 1)
            await _until(functools.partial(lambda e: gate.waiting() == e, expected))
        held.release()
        await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
        # The store group waits for at most one app transaction besides the one holding.
        assert order == ["app 1", "store 1", "app 2", "app 3"]
        assert gate.waiting() == (0, 0)
    finally:
        await engine.dispose()


async def test_a_store_statement_waits_for_the_turn_as_a_store_group(tmp_path: Path) -> None:
    engine = await _engine(tmp_path / "first.db")
    tm = SQLAlchemyTransactionManager(engine)
    outbox = SQLAlchemyOutboxStore(tm, table_prefix="first_")
    await outbox.create_schema()
    gate = writer_gate(engine)
    assert gate is not None
    try:
        entered, leave = asyncio.Event(), asyncio.Event()
        holder = asyncio.create_task(_holding(tm, entered, leave))
        await asyncio.wait_for(entered.wait(), DEADLINE_S)

        async def app() -> None:
            async with tm.transaction() as session:
                await session.execute(text("INSERT INTO log VALUES (1, 'app')"))

        waiting_app = asyncio.create_task(app())
        await _until(lambda: gate.waiting() == (0, 1))
        claim = asyncio.create_task(outbox.claim(10, 1_000))
        await _until(lambda: gate.waiting() == (1, 1))
        leave.set()
        assert await asyncio.wait_for(claim, DEADLINE_S) == []
        await asyncio.wait_for(asyncio.gather(holder, waiting_app), DEADLINE_S)
        assert gate.waiting() == (0, 0)
    finally:
        await outbox.close()
        await engine.dispose()


async def test_waiting_past_the_busy_timeout_is_database_is_locked(tmp_path: Path) -> None:
    engine = await _engine(tmp_path / "locked.db", busy_timeout_ms=50)
    tm = SQLAlchemyTransactionManager(engine)
    try:
        entered, leave = asyncio.Event(), asyncio.Event()
        holder = asyncio.create_task(_holding(tm, entered, leave))
        await asyncio.wait_for(entered.wait(), DEADLINE_S)
        with pytest.raises(OperationalError, match="database is locked") as caught:
            async with tm.transaction() as session:
                await session.execute(text("INSERT INTO log VALUES (1, 'late')"))
        assert isinstance(caught.value.orig, sqlite3.OperationalError)
        leave.set()
        await asyncio.wait_for(holder, DEADLINE_S)
        async with tm.transaction() as session:  # the turn is free again
            await session.execute(text("INSERT INTO log VALUES (2, 'after')"))
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("url", "lock"),
    [
        ("sqlite+aiosqlite:///{dir}/jobs.db", "{dir}/jobs.db-neverlost-writer.lock"),
        ("sqlite+aiosqlite:///{dir}/sub/../jobs.db", "{dir}/jobs.db-neverlost-writer.lock"),
        ("sqlite+aiosqlite:///file:{dir}/jobs.db?mode=rwc&uri=true",
         "{dir}/jobs.db-neverlost-writer.lock"),
        ("sqlite+aiosqlite://", None),
        ("sqlite+aiosqlite:///:memory:", None),
        ("sqlite+aiosqlite:///file::memory:?uri=true", None),
        ("sqlite+aiosqlite:///file:shared?mode=memory&cache=shared&uri=true", None),
    ],
)  # fmt: skip
def test_a_database_file_has_a_lock_file_beside_it_and_memory_none(
    tmp_path: Path, url: str, lock: str | None
) -> None:
    directory = tmp_path.resolve()
    found = writer_lock_path(make_url(url.format(dir=directory)))
    assert found == (None if lock is None else lock.format(dir=directory))


async def test_two_engines_on_one_file_take_turns_on_its_lock_file(tmp_path: Path) -> None:
    """Two engines of one process (each its own gate, as two processes would have) with
    SQLite's busy timeout 0: the second's writer waits on the lock file, then commits."""
    path = tmp_path / "two.db"
    first = await _engine(path, sqlite_busy_timeout_ms=0)
    second = create_async_engine(f"sqlite+aiosqlite:///{path}")
    configure_sqlite(second)
    event.listen(second.sync_engine, "checkout", _no_busy_wait)
    gate = writer_gate(second)
    assert gate is not None
    assert gate.lock_path == writer_lock_path(make_url(f"sqlite:///{path}"))
    try:
        entered, leave = asyncio.Event(), asyncio.Event()
        holder = asyncio.create_task(_holding(SQLAlchemyTransactionManager(first), entered, leave))
        await asyncio.wait_for(entered.wait(), DEADLINE_S)
        second_entered, second_leave = asyncio.Event(), asyncio.Event()
        waiting = asyncio.create_task(
            _holding(SQLAlchemyTransactionManager(second), second_entered, second_leave)
        )
        await _until(gate.waits_for_another_process)
        assert not second_entered.is_set()
        leave.set()
        await asyncio.wait_for(asyncio.gather(holder, second_entered.wait()), DEADLINE_S)
        second_leave.set()
        await asyncio.wait_for(waiting, DEADLINE_S)
        async with first.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="DEFERRED")
            count = (await conn.exec_driver_sql("SELECT count(*) FROM log")).scalar_one()
        assert count == 2
    finally:
        await first.dispose()
        await second.dispose()


def _no_busy_wait(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout = 0")
    cursor.close()


async def test_a_lock_file_that_cannot_be_made_leaves_sqlites_own_lock(tmp_path: Path) -> None:
    path = tmp_path / "nolock.db"
    _in_the_way(Path(f"{path}-neverlost-writer.lock"))
    engine = await _engine(path)
    tm = SQLAlchemyTransactionManager(engine)
    said: list[str] = []
    sink = logger.add(lambda message: said.append(str(message)), level="WARNING")
    try:
        for n in range(2):
            async with tm.transaction() as session:
                await session.execute(text("INSERT INTO log VALUES (:n, 'writer')"), {"n": n})
        assert len(said) == 1  # said once, then the gate goes on without it
        assert "busy handler" in said[0]
    finally:
        logger.remove(sink)
        await engine.dispose()


def _in_the_way(lock_file: Path) -> None:
    lock_file.mkdir()  # a directory where the lock file goes: it cannot be opened to lock


async def test_an_engine_disposed_of_closes_its_lock_file_and_opens_it_again_if_used(
    tmp_path: Path,
) -> None:
    path = tmp_path / "disposed.db"
    engine = await _engine(path)
    lock_file = writer_lock_path(make_url(f"sqlite:///{path}"))
    assert lock_file is not None
    tm = SQLAlchemyTransactionManager(engine)
    try:
        async with tm.transaction() as session:
            await session.execute(text("INSERT INTO log VALUES (1, 'writer')"))
        assert _descriptors_of(lock_file) == 1
        await engine.dispose()
        assert _descriptors_of(lock_file) == 0  # not left to the garbage collector
        async with tm.transaction() as session:
            await session.execute(text("INSERT INTO log VALUES (2, 'writer')"))
        assert _descriptors_of(lock_file) == 1
    finally:
        await engine.dispose()


def _descriptors_of(file: str) -> int:
    """How many of this process's open descriptors are ``file`` (Linux's /proc)."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if _target(fd) == file)


def _target(link: Path) -> str | None:
    try:
        return str(link.readlink())
    except OSError:  # the descriptor closed while listed (the listing's own, say)
        return None


class _Blocking:
    """A SQL function ``block()`` on every connection of an engine: it runs (in aiosqlite's
    thread) until ``finish`` is set, so a statement calling it is in flight for as long as a
    test needs. A read: it takes no SQLite write lock, only the writer turn."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.running, self.finish = threading.Event(), threading.Event()
        event.listen(engine.sync_engine, "connect", self._register)

    def _register(self, dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.create_function("block", 0, self._block)

    def _block(self) -> int:
        self.running.set()
        self.finish.wait(DEADLINE_S)
        return 1


_BLOCK = Statement("block", "SELECT block() AS n", None)


async def test_a_store_statement_holds_the_lock_file_for_its_length(tmp_path: Path) -> None:
    """A store statement that finds the turn free runs from its caller's task, and still holds
    the lock file while it runs: another engine's writer (SQLite's busy timeout 0) waits on the
    file until the statement has ended, then commits."""
    path = tmp_path / "lone.db"
    first = await _engine(path)
    blocking = _Blocking(first)
    await first.dispose()  # its next connection has block()
    backend = SQLiteBackend(first, name="lone")
    second = create_async_engine(f"sqlite+aiosqlite:///{path}")
    configure_sqlite(second)
    event.listen(second.sync_engine, "checkout", _no_busy_wait)
    gate = writer_gate(second)
    assert gate is not None
    try:
        statement = asyncio.create_task(backend.fetch(_BLOCK, {}))
        assert await asyncio.to_thread(blocking.running.wait, DEADLINE_S)
        entered, leave = asyncio.Event(), asyncio.Event()
        leave.set()
        writer = asyncio.create_task(_holding(SQLAlchemyTransactionManager(second), entered, leave))
        await _until(gate.waits_for_another_process)
        assert not entered.is_set()
        blocking.finish.set()
        assert [row["n"] for row in await asyncio.wait_for(statement, DEADLINE_S)] == [1]
        await asyncio.wait_for(writer, DEADLINE_S)
    finally:
        blocking.finish.set()
        await backend.close()
        await first.dispose()
        await second.dispose()


async def test_a_cancelled_store_statement_keeps_the_turn_until_it_has_ended(
    tmp_path: Path,
) -> None:
    """Cancelling the caller does not stop a statement in aiosqlite's thread: the writer turn
    (and with it the lock file) is let go when the statement has ended, not before."""
    engine = await _engine(tmp_path / "cancelled.db")
    blocking = _Blocking(engine)
    await engine.dispose()
    backend = SQLiteBackend(engine, name="cancelled")
    gate = writer_gate(engine)
    assert gate is not None
    try:
        statement = asyncio.create_task(backend.fetch(_BLOCK, {}))
        assert await asyncio.to_thread(blocking.running.wait, DEADLINE_S)
        statement.cancel()
        with pytest.raises(asyncio.CancelledError):
            await statement
        for _ in range(5):
            assert gate.try_acquire() is None  # still held for the statement
            await asyncio.sleep(0.01)
        blocking.finish.set()

        def free() -> bool:
            turns = gate.try_acquire()
            if turns is not None:
                turns.release()
            return turns is not None

        await _until(free)
    finally:
        blocking.finish.set()
        await backend.close()
        await engine.dispose()
