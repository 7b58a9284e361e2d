"""How the SQL stores run their statements: one round trip each, on pooled driver connections.

The job store's whole hot path and the outbox store's own transactions (claim, mark, release,
prune; never ``append``, which writes through the caller's session) run here.

Measured on this project's 2-core machine, a statement through SQLAlchemy Core on a pooled
AsyncConnection cost 450-900 us of CPU (and on SQLite, with one connection per task, a tenth
of the throughput), against 130-160 us on an asyncpg or aiosqlite connection driven directly.
So the hot path bypasses Core, not the pool: on PostgreSQL statements run on asyncpg
connections checked out of the engine's own pool (SQLAlchemy's: its size, overflow, recycle and
pre-ping settings and a borrowed engine's limits all apply). A checkout and checkin cost
~140 us of CPU (measured in a loop), more than a statement's own client work, so a connection
is kept for ``LINGER_S`` (50 ms) after its statement and the next statement runs on it; one left
unused that long goes back to the pool, so an idle store holds no connection (the LISTEN
connection aside). 2 ms was too short on a loaded machine: one job at a time (enqueue, claim,
settle, next_due) checked a connection out and in again for 1-1.4 of its 5 statements (0.05
at 50 ms), and so did every spaced NOTIFY. The store sets no session state: whatever it runs
leaves a connection as it found it, so a pooler such as PgBouncer in transaction mode hands the
server connection on unchanged.

A statement runs as an autocommit statement, its own transaction, with no BEGIN/COMMIT round
trips; only on SQLite do statements that arrive together share one ``BEGIN IMMEDIATE``
transaction (group commit, see ``SQLiteBackend``). The SKIP LOCKED claims need READ COMMITTED:
that is PostgreSQL's default, checked once per connection; a connection whose database
defaults to another level runs each statement in an explicit READ COMMITTED transaction.
SQLite statements take the write lock up front (see ``sql/jobs_sqlite.sql``). Driver
exceptions become ``jobs.errors`` types at this boundary (``errors``); a connection that broke
under a statement is invalidated (the pool discards it), never handed out again.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from jobs.errors import DriverError, StoreUnavailableError
from jobs.spi.support import Coalescer

from . import asyncpg_errors as pg
from .errors import is_value_error, store_error
from .slots import Slots
from .sqlite_writers import WriterTurns, waits_for_itself, writer_gate
from .statements import Statement

__all__ = ["Backend", "PostgresBackend", "Row", "SQLiteBackend"]

T = TypeVar("T")

Row = Mapping[str, Any]
"""A result row, read by column name (asyncpg Records, sqlite3.Row)."""

class Backend(Protocol):
    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]: ...

    async def fetch_unsorted(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        """``fetch`` of a statement whose ORDER BY an index must deliver (a page of a listing):
        the database reads the index in order, never sorts the rows it matched."""
        ...

    async def close(self) -> None: ...


async def _open(engine: AsyncEngine) -> Any:
    """A driver connection made by the engine's pool (its set-up applied), then detached."""
    raw = await engine.raw_connection()
    connection: Any = raw.driver_connection
    raw.detach()
    return connection


_READ_COMMITTED = "neverlost_read_committed"
"""Key in a pooled connection's ``info``: whether its transactions default to READ COMMITTED."""

_CHECKOUT_TRIES = 3

LINGER_S = 0.05
"""How long a connection the store just used stays out of the pool, for its next statement."""

_UNSORTED = "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL enable_sort = off"


@dataclass(slots=True, eq=False)
class _Held:
    """A connection the store has out of the pool, with what every statement reads of it (read
    once at checkout: SQLAlchemy's proxies cost a few attribute hops per read)."""

    fairy: PoolProxiedConnection
    driver: Any  # its asyncpg connection
    read_committed: bool  # its transactions default to READ COMMITTED
    kept_at: float = 0.0  # loop time it was last kept for the next statement

    def broke(self) -> bool:
        return self.fairy.dbapi_connection is None or bool(self.driver.is_closed())


class PostgresBackend:
    """Statements on connections of the engine's pool, at most ``size`` at once.

    A connection is kept for ``LINGER_S`` after its statement and the next statement runs on
    it: a loop of calls, or a runner's claims and settles, then checks out of the pool once
    rather than per statement. A connection left unused that long goes back to the pool.
    """

    def __init__(self, engine: AsyncEngine, *, size: int, name: str) -> None:
        self._engine = engine
        self._name = name
        self._slots = Slots(size)
        self._closed = False
        self._idle: list[_Held] = []
        self._sweep: asyncio.TimerHandle | None = None
        self._returning: set[asyncio.Task[None]] = set()

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        # The hot path (every claim, settle and enqueue): written out rather than through
        # ``_run``, which costs a closure and two more coroutines per statement.
        args = statement.bind(params)
        slots = self._slots
        if not slots.try_take():
            await slots.take()
        try:
            held = await self._acquire()
            try:
                if held.read_committed:
                    rows = await held.driver.fetch(statement.text, *args)
                else:
                    async with held.driver.transaction(isolation="read_committed"):
                        rows = await held.driver.fetch(statement.text, *args)
            except asyncio.CancelledError:
                # asyncpg cancels the statement on the server and waits for that before the
                # connection's next one, so a cancelled connection goes back to the pool.
                await self._checkin(held)
                raise
            except Exception as exc:
                raise await self._failed(held, exc) from exc
            if not self._keep(held):
                await self._checkin(held)
            return cast(list[Row], rows)
        finally:
            slots.give()

    async def fetch_unsorted(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        """``fetch`` planned with ``enable_sort = off``, in a transaction of its own (SET LOCAL:
        nothing outlives it, so a pooler hands the connection on unchanged); three round trips.

        PostgreSQL picks between reading an index in order (stopping at the LIMIT) and fetching
        every matching row to sort it by its row estimate, and on a freshly filled table, or
        one analysed before its failures, that estimate is a few rows: a page of failed jobs
        among 200,000 sorted all 20,000 of them (18-24 ms; 0.2 ms read in order). With sorting
        priced out the ordered index scan is chosen whatever the statistics say.
        """
        args = statement.bind(params)

        async def run(driver: Any) -> list[Row]:
            await driver.execute(_UNSORTED)
            rows: list[Row] = await driver.fetch(statement.text, *args)
            await driver.execute("COMMIT")
            return rows

        return await self._run(run)

    async def execute_script(self, script: str) -> None:
        """Run ``script`` (statements with inline literals only) as one simple-query round trip."""

        async def run(driver: Any) -> None:
            await driver.execute(script)

        await self._run(run)

    async def _run(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(asyncpg connection)`` on a connection: the one kept from the latest
        statement, else one of the pool's."""
        await self._slots.take()
        try:
            held = await self._acquire()
            try:
                result = await work(held.driver)
            except asyncio.CancelledError:
                await self._checkin(held)  # as in ``fetch``
                raise
            except Exception as exc:
                raise await self._failed(held, exc) from exc
            if not self._keep(held):
                await self._checkin(held)
            return result
        finally:
            self._slots.give()

    async def close(self) -> None:
        """Give the connections kept between statements back to the pool."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        idle, self._idle = self._idle, []
        await self._checkin_all(idle)
        await asyncio.gather(*self._returning, return_exceptions=True)

    async def _acquire(self) -> _Held:
        """The connection kept from the latest statement, else one of the pool's."""
        if self._closed:
            raise DriverError(f"{self._name} is closed")
        idle = self._idle
        while idle:
            held = idle.pop()
            if not held.broke():
                return held
            await self._discard(held)
        return await self._checkout()

    def _keep(self, held: _Held) -> bool:
        """Keep ``held`` for the next statement (see ``LINGER_S``); False when it must go back
        to the pool now (the store closed, or it was left inside a transaction)."""
        if self._closed or held.driver.is_in_transaction():
            return False
        loop = asyncio.get_running_loop()
        held.kept_at = loop.time()
        self._idle.append(held)
        if self._sweep is None:
            self._sweep = loop.call_later(LINGER_S, self._return_unused)
        return True

    def _return_unused(self) -> None:
        """Check in the kept connections unused for ``LINGER_S``; look again while any is kept."""
        self._sweep = None
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - LINGER_S
        unused: list[_Held] = []
        while self._idle and self._idle[0].kept_at <= cutoff:
            unused.append(self._idle.pop(0))
        if unused:
            task = loop.create_task(self._checkin_all(unused), name=f"{self._name} pool return")
            self._returning.add(task)
            task.add_done_callback(self._returning.discard)
        if self._idle:
            self._sweep = loop.call_at(self._idle[0].kept_at + LINGER_S, self._return_unused)

    async def _checkin_all(self, connections: list[_Held]) -> None:
        for held in connections:
            await self._checkin(held)

    async def _failed(self, held: _Held, exc: Exception) -> Exception:
        """``exc`` raised by a statement on ``held``: the connection back to the pool, or
        invalidated if it broke; the error to raise in its place."""
        if isinstance(exc, pg.PostgresError):  # the server refused it; the connection is fine
            await self._checkin(held)
            lost = held.broke()
        else:
            lost = held.broke()
            await self._discard(held)
        if lost and not is_value_error(exc):  # a refused argument may close it: not a loss
            return StoreUnavailableError(f"{self._name} lost its database connection: {exc}")
        return store_error(exc, self._name)

    async def _checkout(self) -> _Held:
        """A live connection of the pool: one the server closed while it sat idle is discarded
        (no round trip: asyncpg saw the socket close) and the next one taken."""
        for _ in range(_CHECKOUT_TRIES):
            try:
                connection = await self._engine.raw_connection()
            except Exception as exc:
                raise store_error(exc, self._name) from exc
            driver: Any = connection.driver_connection
            held = _Held(connection, driver, bool(connection.info.get(_READ_COMMITTED)))
            if not held.broke():
                break
            await self._discard(held)
        else:
            raise StoreUnavailableError(f"{self._name}: every pooled connection was closed")
        if _READ_COMMITTED not in connection.info:
            try:
                level = await driver.fetchval(
                    "SELECT current_setting('default_transaction_isolation')"
                )
            except BaseException:
                await self._discard(held)
                raise
            held.read_committed = connection.info[_READ_COMMITTED] = level == "read committed"
        return held

    async def _checkin(self, held: _Held) -> None:
        """Back to the pool; one left inside a transaction (a script that failed half-way) is
        discarded instead: the pool's reset does not see asyncpg's own transactions."""
        if held.fairy.dbapi_connection is None or held.driver.is_in_transaction():
            await self._discard(held)
        else:
            await greenlet_spawn(held.fairy.close)

    async def _discard(self, held: _Held) -> None:
        with contextlib.suppress(Exception):
            await greenlet_spawn(held.fairy.invalidate)


_Statement = tuple[Statement, dict[str, Any]]


class SQLiteBackend:
    """One aiosqlite connection, with group commit.

    SQLite has one writer at a time, so more connections would only queue on its lock. With
    ``synchronous=FULL`` every commit waits for an fsync, which would cap the store at about
    one operation per fsync; so statements that arrive while others run are executed together
    in one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (``jobs.coalescing``), and each caller gets its
    result once that commit is durable. A lone statement runs on its own (autocommit). Each
    statement keeps its own effect: if one in a group fails, the group is rolled back and its
    statements are run again one by one, so that only the failing one reports the error.
    Each group is formed once it has the engine's writer turn (``engine.SQLiteWriterGate``,
    as a store's group), queueing with the app's transactions in this process rather than in
    SQLite's busy handler; what comes in while it waits joins it. A statement the Coalescer
    would send alone (nothing in flight, calls not overlapping) that finds the turn free, in
    this process and between processes, takes it at once and runs from its caller's task
    (``_alone``): the same turn, without a task to wait in.
    """

    def __init__(self, engine: AsyncEngine, *, name: str) -> None:
        self._engine = engine
        self._name = name
        self._gate = writer_gate(engine)
        self._connection: Any = None
        self._lock = asyncio.Lock()
        self._releasing: set[asyncio.Task[None]] = set()
        self._groups: Coalescer[_Statement, list[Row]] = Coalescer(
            self._run_group,
            name=f"{name} commits",
            hold=None if self._gate is None else self._writer_turn,
        )

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        if self._connection is None:
            await self._connect()
        groups, gate = self._groups, self._gate
        if gate is not None and waits_for_itself(gate):
            raise DriverError(
                f"{self._name}: this task's open transaction on the same SQLite database holds "
                "its write lock, so the store's statement would wait for it until the busy "
                "timeout; write the job in that transaction through the outbox "
                "(outbox.append / outbox.append_in(session, ...)), or after it commits"
            )
        if gate is not None and groups.go_alone():
            turns = gate.try_acquire()
            if turns is not None:
                try:
                    return await self._alone(turns, statement, params)
                finally:
                    groups.alone_done()
            groups.alone_done()
        return await groups.submit((statement, params))

    async def fetch_unsorted(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        """``fetch``: SQLite's planner reads the index in order for these statements with or
        without ``ANALYZE`` statistics."""
        return await self.fetch(statement, params)

    async def close(self) -> None:
        await self._groups.close()
        await asyncio.gather(*self._releasing, return_exceptions=True)
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    @contextlib.asynccontextmanager
    async def _writer_turn(self) -> AsyncIterator[None]:
        assert self._gate is not None
        try:
            turns = await self._gate.acquire(store=True)
        except Exception as exc:  # "database is locked", as SQLite's own would read
            raise store_error(exc, self._name) from exc
        try:
            yield
        finally:
            turns.release()

    async def _alone(
        self, turns: WriterTurns, statement: Statement, params: dict[str, Any]
    ) -> list[Row]:
        """A lone statement that found the writer turn free (``try_acquire``): run from the
        caller's task in that turn, a group of one with no task or future of its own (one
        enqueue at a time: two loop iterations fewer per statement).

        A caller cancelled while its statement runs leaves the statement running in
        aiosqlite's thread: the turn (and the lock file) is let go only once it has ended."""
        connection = self._connection
        try:
            rows = await connection.execute_fetchall(statement.text, params)
        except asyncio.CancelledError:
            self._release_after(connection, turns)
            raise
        except Exception as exc:
            turns.release()
            raise store_error(exc, self._name) from exc
        except BaseException:
            turns.release()
            raise
        turns.release()
        return list(rows)

    def _release_after(self, connection: Any, turns: WriterTurns) -> None:
        task = asyncio.get_running_loop().create_task(self._release_when_idle(connection, turns))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    @staticmethod
    async def _release_when_idle(connection: Any, turns: WriterTurns) -> None:
        """Release ``turns`` once aiosqlite's thread has run what it was given before: it runs
        one thing at a time, in order, so a no-op queued now ends after them."""
        try:
            with contextlib.suppress(Exception):
                await connection.execute_fetchall("SELECT 1")
        finally:
            turns.release()

    async def _run_group(self, group: list[_Statement]) -> list[list[Row] | Exception]:
        if len(group) > 1:
            together = await self._run_together(group)
            if together is not None:
                return together
        return [await self._run_alone(statement, params) for statement, params in group]

    async def _run_together(self, group: list[_Statement]) -> list[list[Row] | Exception] | None:
        """The group's results from one transaction; None if a statement failed (rolled back)."""
        connection = self._connection
        try:
            await connection.execute_fetchall("BEGIN IMMEDIATE")
        except Exception as exc:  # nothing ran: every caller gets the error (busy, lost...)
            return [store_error(exc, self._name) for _ in group]
        try:
            results: list[list[Row] | Exception] = [
                list(await connection.execute_fetchall(statement.text, params))
                for statement, params in group
            ]
            await connection.commit()
        except Exception:
            with contextlib.suppress(Exception):
                if connection.in_transaction:
                    await connection.rollback()
            return None
        return results

    async def _run_alone(
        self, statement: Statement, params: dict[str, Any]
    ) -> list[Row] | Exception:
        try:
            return list(await self._connection.execute_fetchall(statement.text, params))
        except Exception as exc:
            return store_error(exc, self._name)

    async def _connect(self) -> None:
        async with self._lock:
            if self._connection is not None:
                return
            try:
                connection = await _open(self._engine)
            except Exception as exc:
                raise store_error(exc, self._name) from exc
            if connection.isolation_level is not None:
                await connection.close()
                raise DriverError(
                    f"{self._name} needs a SQLite engine set up by "
                    "orm_sqlalchemy.engine.configure_sqlite (autocommit driver connections)"
                )
            connection.row_factory = sqlite3.Row
            self._connection = connection
