"""How the SQL stores run their statements: held driver connections, one round trip each.

The job store's whole hot path and the outbox store's own transactions (claim, mark, release,
prune; never ``append``, which writes through the caller's session) run here.

Measured on this project's 2-core machine, a statement through SQLAlchemy Core on a pooled
AsyncConnection cost 450-900 us of CPU (and on SQLite, with one connection per task, a tenth
of the throughput), against 130-160 us on a held asyncpg or aiosqlite connection. The hot path
(claim, heartbeat, settle) is most of a worker's database work, so it bypasses Core. The
connections still come from the engine (``engine.raw_connection()``, then detached from its
pool): the engine's URL, connect_args, creator and SQLite set-up all apply, and a borrowed
engine's pool is neither drained nor resized.

A statement runs as an autocommit statement, its own transaction, with no BEGIN/COMMIT round
trips; only on SQLite do statements that arrive together share one ``BEGIN IMMEDIATE``
transaction (group commit, see ``SQLiteBackend``). PostgreSQL connections are set to READ
COMMITTED for the session (SKIP LOCKED claims need it, whatever the database default); SQLite
statements take the write lock up front (see ``sql/jobs_sqlite.sql``). Driver exceptions
become ``jobs.errors`` types here, at the boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Mapping
from typing import Any, Protocol

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.errors import DriverError, StoreUnavailableError

from .batching import Coalescer
from .errors import store_error
from .statements import Statement

__all__ = ["Backend", "PostgresBackend", "Row", "SQLiteBackend"]

Row = Mapping[str, Any]
"""A result row, read by column name (asyncpg Records, sqlite3.Row)."""

class Backend(Protocol):
    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]: ...

    async def close(self) -> None: ...


async def _open(engine: AsyncEngine) -> Any:
    """A driver connection made by the engine's pool (its set-up applied), then detached."""
    raw = await engine.raw_connection()
    connection: Any = raw.driver_connection
    raw.detach()
    return connection


class PostgresBackend:
    """Up to ``size`` asyncpg connections of the store's own; asyncpg caches prepared plans."""

    def __init__(self, engine: AsyncEngine, *, size: int, name: str) -> None:
        self._engine = engine
        self._name = name
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Any] = []
        self._pids: set[int] = set()
        self._signals: Any = None
        self._closed = False

    def owns(self, pid: int) -> bool:
        """Whether ``pid`` is the server process of one of this backend's connections."""
        return pid in self._pids

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        async with self._slots:
            if self._closed:
                raise DriverError(f"{self._name} is closed")
            try:
                connection = self._checkout() or await self._connect()
            except Exception as exc:
                raise store_error(exc, self._name) from exc
            try:
                rows: list[Row] = await connection.fetch(statement.text, *statement.bind(params))
            except asyncpg.PostgresError as exc:
                self._release(connection)
                raise store_error(exc, self._name) from exc
            except asyncio.CancelledError:
                # asyncpg cancels the statement on the server and waits for that before the
                # connection's next one, so the connection stays usable.
                self._release(connection)
                raise
            except Exception as exc:
                # Lost or broken: never hand it out again.
                lost = connection.is_closed()
                connection.terminate()
                if lost:
                    raise StoreUnavailableError(
                        f"{self._name} lost its database connection: {exc}"
                    ) from exc
                raise store_error(exc, self._name) from exc
            self._release(connection)
            return rows

    async def signal(self, statement: Statement, params: dict[str, Any]) -> None:
        """Run ``statement`` (a NOTIFY) on a connection of its own that does not wait for fsync.

        A notification has nothing to keep: if the server crashes before flushing it, its
        listeners' connections are gone too. One caller at a time (the store's Notifier).
        """
        if self._closed:
            raise DriverError(f"{self._name} is closed")
        try:
            if self._signals is None or self._signals.is_closed():
                self._signals = await self._connect(synchronous_commit=False)
            await self._signals.fetch(statement.text, *statement.bind(params))
        except Exception as exc:
            raise store_error(exc, self._name) from exc

    async def close(self) -> None:
        self._closed = True
        if self._signals is not None:
            self._idle.append(self._signals)
            self._signals = None
        idle, self._idle = self._idle, []
        for connection in idle:
            try:
                await connection.close(timeout=2)
            except Exception:
                connection.terminate()

    def _checkout(self) -> Any:
        """An idle connection, skipping any the server closed meanwhile."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.is_closed():
                return connection
            self._pids.discard(connection.get_server_pid())
        return None

    async def _connect(self, *, synchronous_commit: bool = True) -> Any:
        connection = await _open(self._engine)
        try:
            await connection.execute(
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"
            )
            if not synchronous_commit:
                await connection.execute("SET synchronous_commit = off")
        except BaseException:
            connection.terminate()
            raise
        self._pids.add(connection.get_server_pid())
        return connection

    def _release(self, connection: Any) -> None:
        if connection.is_closed():
            self._pids.discard(connection.get_server_pid())
            return
        if self._closed:
            connection.terminate()
        else:
            self._idle.append(connection)


_Statement = tuple[Statement, dict[str, Any]]


class SQLiteBackend:
    """One aiosqlite connection, with group commit.

    SQLite has one writer at a time, so more connections would only queue on its lock. With
    ``synchronous=FULL`` every commit waits for an fsync, which would cap the store at about
    one operation per fsync; so statements that arrive while others run are executed together
    in one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (see ``batching``), and each caller gets its
    result once that commit is durable. A lone statement runs on its own (autocommit). Each
    statement keeps its own effect: if one in a group fails, the group is rolled back and its
    statements are run again one by one, so that only the failing one reports the error.
    """

    def __init__(self, engine: AsyncEngine, *, name: str) -> None:
        self._engine = engine
        self._name = name
        self._connection: Any = None
        self._lock = asyncio.Lock()
        self._groups: Coalescer[_Statement, list[Row]] = Coalescer(
            self._run_group, name=f"{name} commits"
        )

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        if self._connection is None:
            await self._connect()
        return await self._groups.submit((statement, params))

    async def close(self) -> None:
        await self._groups.close()
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

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
