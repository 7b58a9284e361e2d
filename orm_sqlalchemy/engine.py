"""Async engines set up for job and outbox work: SQLite tuned for concurrent writers.

SQLite allows one writer at a time. Python's sqlite3 driver begins transactions lazily (a
deferred ``BEGIN`` before the first write), so a transaction that read first and then writes
must upgrade its lock, and in WAL mode that upgrade fails with "database is locked" at once,
whatever the busy timeout. ``configure_sqlite`` applies SQLAlchemy's documented recipe: turn
off the driver's own BEGIN (``isolation_level = None``) and emit ``BEGIN IMMEDIATE`` from a
``begin`` listener, so a transaction takes the write lock up front and waits (busy timeout)
instead of failing. It also turns on WAL (readers never block the writer) and foreign keys.

A single transaction can ask for a deferred BEGIN (for a long read-only report, say) with
``conn.execution_options(sqlite_begin="DEFERRED")``. PostgreSQL engines are left as they are.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

__all__ = [
    "ACCEPTED_SCHEMES",
    "BUSY_TIMEOUT_MS",
    "configure_sqlite",
    "create_engine",
    "is_sqlite",
    "normalize_url",
    "pooler_connect_args",
]

BUSY_TIMEOUT_MS = 5_000
"""How long a SQLite connection waits for the write lock before "database is locked"."""

_CONFIGURED_FLAG = "_neverlost_sqlite_configured"
_CONNECTION_FLAG = "neverlost_sqlite"
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE"})

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgres+asyncpg": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}
ACCEPTED_SCHEMES = tuple(f"{scheme}://" for scheme in _ASYNC_DRIVERS)
"""The URL schemes a store accepts (others, sync drivers included, are refused)."""


def create_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """An AsyncEngine for ``url``; SQLite ones configured by ``configure_sqlite``.

    ``url`` is normalised by ``normalize_url``. ``kwargs`` go to
    ``sqlalchemy.ext.asyncio.create_async_engine``. A PostgreSQL URL with
    ``?prepared_statement_cache_size=0`` (the one setting a store behind PgBouncer in
    transaction mode needs) gets no prepared-statement cache at any layer: SQLAlchemy's,
    asyncpg's (``statement_cache_size=0``), and uniquely named statements, so two clients
    never collide on a server connection they share (``pooler_connect_args``).
    """
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "postgresql" and (
        parsed.query.get("prepared_statement_cache_size") == "0"
    ):
        kwargs["connect_args"] = {**pooler_connect_args(), **kwargs.get("connect_args", {})}
    engine = create_async_engine(parsed, **kwargs)
    if is_sqlite(engine):
        configure_sqlite(engine)
    return engine


def pooler_connect_args() -> dict[str, Any]:
    """``connect_args`` for an asyncpg engine behind a pooler in transaction mode (PgBouncer
    before 1.21, or without ``max_prepared_statements``): no prepared statement outlives its
    transaction or collides with another client's on a shared server connection."""
    return {
        "statement_cache_size": 0,
        "prepared_statement_cache_size": 0,
        "prepared_statement_name_func": _unique_statement_name,
    }


def _unique_statement_name() -> str:
    return f"__neverlost_{uuid.uuid4().hex}__"


def normalize_url(url: str | URL) -> URL:
    """``url`` with the project's async driver: ``sqlite://`` becomes ``sqlite+aiosqlite://``,
    ``postgres://`` and ``postgresql://`` become ``postgresql+asyncpg://`` (Heroku-style URLs
    work as given). Any other scheme is a ValueError naming the accepted ones."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValueError(
            f"cannot parse database URL {str(url)!r}; accepted schemes: "
            + ", ".join(ACCEPTED_SCHEMES)
        ) from exc
    driver = _ASYNC_DRIVERS.get(parsed.drivername.lower())
    if driver is None:
        raise ValueError(
            f"unsupported database URL scheme {parsed.drivername + '://'!r} in "
            f"{parsed.render_as_string(hide_password=True)!r}; accepted schemes: "
            + ", ".join(ACCEPTED_SCHEMES)
        )
    return parsed.set(drivername=driver)


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def configure_sqlite(engine: AsyncEngine, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Apply WAL, a busy timeout, foreign keys and ``BEGIN IMMEDIATE`` to a SQLite engine.

    Works on a borrowed engine too: connections already in its pool are set up the next time
    they are checked out. Calling it again is a no-op; on a non-SQLite engine it does nothing.
    """
    if not is_sqlite(engine):
        return
    sync_engine = engine.sync_engine
    if getattr(sync_engine, _CONFIGURED_FLAG, False):
        return

    def on_checkout(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
        if record.info.get(_CONNECTION_FLAG):
            return
        _prepare_connection(dbapi_connection, busy_timeout_ms)
        record.info[_CONNECTION_FLAG] = True

    def on_begin(conn: Connection) -> None:
        mode = str(conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")).upper()
        if mode not in _BEGIN_MODES:
            raise ValueError(f"sqlite_begin must be one of {sorted(_BEGIN_MODES)}, got {mode!r}")
        conn.exec_driver_sql(f"BEGIN {mode}")

    event.listen(sync_engine, "checkout", on_checkout)
    event.listen(sync_engine, "begin", on_begin)
    setattr(sync_engine, _CONFIGURED_FLAG, True)


def _prepare_connection(dbapi_connection: Any, busy_timeout_ms: int) -> None:
    # The driver must not emit BEGIN of its own: our "begin" listener does.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        _use_wal(cursor)
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the file to WAL once. WAL is kept in the file, so later connections find it set.

    Two connections switching a brand-new file at the same moment: SQLite fails one with
    "database is locked" at once, ignoring the busy timeout; it retries briefly (this happens
    only while a new database file is first opened).
    """
    cursor.execute("PRAGMA journal_mode")
    if str(cursor.fetchone()[0]).lower() == "wal":
        return
    for attempt in range(_WAL_SWITCH_TRIES):
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as exc:  # the driver's OperationalError, wrapped by the adapter
            if "locked" not in str(exc) or attempt == _WAL_SWITCH_TRIES - 1:
                raise
            time.sleep(0.01)


_WAL_SWITCH_TRIES = 50
