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
transaction (group commit: ``sqlite_writes.SQLiteBackend``). The SKIP LOCKED claims need
READ COMMITTED: that is PostgreSQL's default, checked once per connection; a connection whose
database defaults to another level runs each statement in an explicit READ COMMITTED
transaction.
SQLite statements take the write lock up front (see ``sql/jobs_sqlite.sql``). Driver
exceptions become ``jobs.errors`` types at this boundary (``errors``); a connection that broke
under a statement is invalidated (the pool discards it), never handed out again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from jobs.errors import DriverError, StoreUnavailableError

from . import asyncpg_errors as pg
from .errors import is_value_error, store_error
from .slots import Slots
from .statements import Statement

__all__ = ["Backend", "PostgresBackend", "Row", "Steps", "open_detached"]

T = TypeVar("T")

Row = Mapping[str, Any]
"""A result row, read by column name (asyncpg Records, sqlite3.Row)."""

Steps = Generator[tuple[Statement, dict[str, Any]], list[Row], list[Row]]
"""Statements run in one transaction, each chosen from the rows of those before it: yields
``(statement, params)``, is sent each one's rows, returns the result."""


class Backend(Protocol):
    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]: ...

    async def fetch_unsorted(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        """``fetch`` of a statement whose ORDER BY an index must deliver (a page of a listing):
        the database reads the index in order, never sorts the rows it matched."""
        ...

    async def close(self) -> None: ...


async def _run_steps(driver: Any, steps: Steps) -> list[Row]:
    """Each step of ``steps`` on the asyncpg connection ``driver``, sent the rows of the last."""
    try:
        statement, params = next(steps)
        while True:
            rows: list[Row] = await driver.fetch(statement.text, *statement.bind(params))
            statement, params = steps.send(rows)
    except StopIteration as done:
        result: list[Row] = done.value
        return result


async def open_detached(engine: AsyncEngine) -> Any:
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

    async def fetch_script(self, begin: str, steps: Callable[[], Steps]) -> list[Row]:
        """Run ``steps()`` in one READ COMMITTED transaction, opened by ``begin`` (``BEGIN
        ISOLATION LEVEL READ COMMITTED``, then statements with inline literals only, such as
        advisory *xact* locks: one simple-query round trip), committed after the last step.

        Nothing outlives the transaction (no SET, no named prepared statement of its own, only
        transaction-scoped locks), so a pooler in transaction mode hands the connection on
        unchanged. A step that fails rolls it back; a cancelled one leaves the connection in
        its transaction, and ``_checkin`` discards it."""

        async def run(driver: Any) -> list[Row]:
            try:
                await driver.execute(begin)
                result = await _run_steps(driver, steps())
                await driver.execute("COMMIT")
            except Exception:
                if not driver.is_closed() and driver.is_in_transaction():
                    with contextlib.suppress(Exception):
                        await driver.execute("ROLLBACK")
                raise
            return result

        return await self._run(run)

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
        lost = held.broke()  # read before the check-in, which lets go of the connection
        if isinstance(exc, pg.PostgresError):  # the server refused it; the connection is fine
            await self._checkin(held)
        else:
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
