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

Writers of one process queue in the process, not in SQLite's busy handler: a configured engine
has a writer gate (``writer_gate(engine)``; ``_database.sqlite_writes``: how a write on SQLite
is scheduled, why, and the figures), whose turn the ``begin`` listener takes for a transaction
opened by the transaction manager (``open_turn_slot``).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.engine import create_engine as create_sync_sqlalchemy_engine
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

try:
    from sqlalchemy.util import await_ as _await  # SQLAlchemy 2.1
except ImportError:  # pragma: no cover - SQLAlchemy 2.0
    from sqlalchemy.util import await_only as _await

from jobs.errors import require_extra
from jobs.spi.support import redact_url

from ._database.sqlite_writes import (
    SQLiteWriterGate,
    TurnWatcher,
    attach_writer_gate,
    take_turn_at_begin,
    writer_gate,
)
from ._sqlite_files import private_database_files

__all__ = [
    "ACCEPTED_SCHEMES",
    "BUSY_TIMEOUT_MS",
    "POSTGRES_POOL_SIZE",
    "SQLiteWriterGate",
    "TurnWatcher",
    "configure_sqlite",
    "create_engine",
    "create_sync_engine",
    "is_sqlite",
    "normalize_url",
    "pooler_connect_args",
    "writer_gate",
]

POSTGRES_POOL_SIZE = 20
"""The pool size ``create_engine`` gives a PostgreSQL engine unless told (see there)."""

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

_SYNC_DRIVERS = {
    "sqlite": "sqlite+pysqlite",
    "sqlite+pysqlite": "sqlite+pysqlite",
    "sqlite+aiosqlite": "sqlite+pysqlite",
    "postgres": "postgresql+psycopg",
    "postgresql": "postgresql+psycopg",
    "postgres+asyncpg": "postgresql+psycopg",
    "postgresql+asyncpg": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}


def create_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """An AsyncEngine for ``url``; SQLite ones configured by ``configure_sqlite``.

    ``url`` is normalised by ``normalize_url``. ``kwargs`` go to
    ``sqlalchemy.ext.asyncio.create_async_engine``. A PostgreSQL URL with
    ``?prepared_statement_cache_size=0`` (the one setting a store behind PgBouncer in
    transaction mode needs) gets no prepared-statement cache at any layer: SQLAlchemy's,
    asyncpg's (``statement_cache_size=0``), and uniquely named statements, so two clients
    never collide on a server connection they share (``pooler_connect_args``).

    A PostgreSQL engine's pool keeps ``POSTGRES_POOL_SIZE`` connections unless ``pool_size``
    (or a ``poolclass``) is given. They are shared by the app's transactions (one each while
    open), the job store's statements (up to its ``pool_size``, 10) and the outbox store's (up
    to 4); SQLAlchemy's default pool of 5 closes every connection past the fifth at check-in
    (its overflow), so under load connections are opened and closed all the time: measured,
    10 producers with the relay and runner in the same process opened 172 connections in 4 s
    on the default pool and 17 on a pool of 20, at 2.2 against 1.6 ms of CPU per committed
    transaction and 240 against 370 tx/s. Give a borrowed engine the same room.

    The pool hands out the connection given back last (``pool_use_lifo``), and each new
    connection learns the codecs of the arrays the stores bind as it opens
    (``_prime_array_codecs``): a connection's first use of a statement costs a prepare round
    trip, and its first ``integer[]``/``bigint[]`` three more, and in arrival order (the
    default) every statement of the stores came to each of the pool's connections in turn.
    Measured, the outbox load row (10 producers, relay and runner in the same process), 19
    runs alternated with the default in three sittings: commit-to-handler p99 median 197 ->
    159, 165 -> 115 and 135 -> 117 ms, p50 35 -> 30 and 30 -> 27 ms, commit tx/s 236 -> 228,
    380 -> 373 and 428 -> 422 (ours higher in 11 of the 19 pairs). With the last-in order
    connections used rarely sit idle longest: one a server closed meanwhile is discarded by the
    stores, an app's session meets it unless the engine pre-pings (``pool_pre_ping=True``).

    A SQLite engine's pool rolls back only the connections given back in a transaction, not
    every one (``_roll_back_if_open``), unless ``pool_reset_on_return`` is given. A database
    file it creates is private, mode 0600, and so are its ``-wal`` and ``-shm`` files
    (``_sqlite_files``).
    """
    parsed = normalize_url(url)
    reset_open_only = False
    postgres = parsed.get_backend_name() == "postgresql"
    if postgres:
        require_extra("PostgreSQL", "postgres", "asyncpg")
        parsed, kwargs = _libpq_ssl_options(parsed, kwargs)
        if "poolclass" not in kwargs:
            kwargs.setdefault("pool_size", POSTGRES_POOL_SIZE)
            kwargs.setdefault("pool_use_lifo", True)
        if parsed.query.get("prepared_statement_cache_size") == "0":
            kwargs["connect_args"] = {**pooler_connect_args(), **kwargs.get("connect_args", {})}
    elif "pool_reset_on_return" not in kwargs:
        kwargs["pool_reset_on_return"] = None
        reset_open_only = True
    engine = create_async_engine(parsed, **kwargs)
    if is_sqlite(engine):
        configure_sqlite(engine)
        private_database_files(engine)
    if postgres:
        event.listen(engine.sync_engine, "connect", _prime_array_codecs)
    if reset_open_only:
        event.listen(engine.sync_engine, "reset", _roll_back_if_open)
    return engine


_PRIMED_ARRAYS = "SELECT CAST($1 AS integer[]) IS NULL, CAST($2 AS bigint[]) IS NULL"
"""Binds the array types the stores' statements send besides ``text[]`` (asyncpg knows that one
without asking the server), so that a new connection learns their codecs as it is opened."""


def create_sync_engine(url: str | URL, **kwargs: Any) -> Engine:
    """A sync Engine on the database of ``url`` (any URL ``create_engine`` takes, so one setting
    serves both): SQLite through the standard library's sqlite3, PostgreSQL through psycopg 3
    (the ``postgres`` extra). For an app's own sessions (Flask, scripts) that write outbox
    entries with ``SQLAlchemyOutboxStore.append_in``.

    A SQLite engine gets ``configure_sqlite`` (WAL, busy timeout, foreign keys, ``BEGIN
    IMMEDIATE``: a request that reads, then writes, waits for the write lock instead of
    failing with "database is locked" while a worker writes) and a private database file.
    Its transactions meet the worker's in SQLite's busy handler (they do not take the writer
    lock file of an async engine's transactions). ``kwargs`` go to SQLAlchemy's
    ``create_engine``.
    """
    parsed = _sync_url(url)
    if parsed.get_backend_name() == "postgresql":
        require_extra("PostgreSQL from sync code", "postgres", "psycopg")
    engine = create_sync_sqlalchemy_engine(parsed, **kwargs)
    if engine.dialect.name == "sqlite":
        configure_sqlite(engine)
        private_database_files(engine)
    return engine


def _sync_url(url: str | URL) -> URL:
    try:
        parsed: URL | None = make_url(url)
    except (ArgumentError, ValueError):
        parsed = None
    driver = None if parsed is None else _SYNC_DRIVERS.get(parsed.drivername.lower())
    if parsed is None or driver is None:
        raise ValueError(
            f"cannot make a sync engine of {redact_url(url)!r}; accepted schemes: "
            + ", ".join(f"{scheme}://" for scheme in _SYNC_DRIVERS)
        )
    return parsed.set(drivername=driver)


def _prime_array_codecs(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """Have a new PostgreSQL connection of ``create_engine`` learn the codecs of ``integer[]``
    and ``bigint[]`` as it is opened (``_PRIMED_ARRAYS``), not in the first store statement that
    binds them.

    asyncpg introspects those types the first time each connection binds them: three more round
    trips (``jit`` read and turned off, the type query, ``jit`` set back) in the middle of that
    statement. The job store's ``enqueue_many`` binds both, so the relay's batch publish paid
    them once on each of the pool's connections it came to: measured, 10 producers with the
    relay and runner in one process, 8 such publishes in a 4 s window at 55-125 ms against a
    p50 of 8 ms, and every entry committed meanwhile waited for the next claim behind them.
    At connect time they cost the same round trips once, before the connection serves anyone.
    (DDL through the engine makes SQLAlchemy's dialect reload asyncpg's type cache: connections
    open before it learn the types again at their next use.)
    """
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is None or not hasattr(driver, "fetchval"):
        return
    _await(driver.fetchval(_PRIMED_ARRAYS, None, None))


def _roll_back_if_open(
    dbapi_connection: Any, record: ConnectionPoolEntry, state: PoolResetState
) -> None:
    """The pool's reset on return for a SQLite engine of ``create_engine``: roll back only a
    connection still in a transaction (``pool_reset_on_return=None`` with this ``reset``
    listener, SQLAlchemy's documented way to replace its reset).

    The default reset rolls back every connection returned after a commit, which on
    aiosqlite is one more hop to the driver's thread in each app transaction, for nothing:
    the driver runs in autocommit (``configure_sqlite``), so a connection committed or rolled
    back through SQLAlchemy is out of its transaction, which sqlite3 knows without a hop
    (``in_transaction``). One given back mid-transaction (a caller that detached or dropped
    it, a store's statement cancelled between its BEGIN and COMMIT) is rolled back as before.
    Measured, one producer committing an INSERT plus an outbox append: 7 hops a transaction
    down to 6.
    """
    if not state.asyncio_safe or state.transaction_was_reset:
        return
    driver = record.driver_connection
    if driver is not None and driver.in_transaction:
        dbapi_connection.rollback()


LIBPQ_SSL_OPTIONS = (
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
)
"""libpq's TLS options, as a PostgreSQL URL's query gives them (``?sslmode=require``)."""
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def _libpq_ssl_options(url: URL, kwargs: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
    """``?sslmode=...`` (and libpq's other TLS options) of a PostgreSQL URL, handed to asyncpg.

    SQLAlchemy's asyncpg dialect passes each query option to ``asyncpg.connect`` as a keyword,
    and asyncpg takes none of these (``ssl=`` instead): ``?sslmode=require`` failed at connect
    with a TypeError. asyncpg reads them, with libpq's meaning, from a DSN's query; so they
    leave the URL for a DSN of their own in ``connect_args`` (the URL's host, user and
    database still win, being keywords). A ``dsn`` or ``ssl`` the caller put in
    ``connect_args`` is left as it is. An unknown ``sslmode`` is a ValueError before any I/O.
    """
    found = {key: str(url.query[key]) for key in LIBPQ_SSL_OPTIONS if key in url.query}
    if not found:
        return url, kwargs
    mode = found.get("sslmode")
    if mode is not None and mode not in SSL_MODES:
        raise ValueError(f"sslmode={mode!r} is not one of libpq's: {', '.join(SSL_MODES)}")
    url = url.difference_update_query(found)
    connect_args = dict(kwargs.get("connect_args", {}))
    if "dsn" not in connect_args and "ssl" not in connect_args:
        connect_args["dsn"] = "postgresql://?" + urlencode(found)
    return url, {**kwargs, "connect_args": connect_args}


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
        parsed: URL | None = make_url(url)
    except (ArgumentError, ValueError):  # their messages quote the URL: neither chained nor kept
        parsed = None
    if parsed is None:
        raise ValueError(
            f"cannot parse database URL {redact_url(url)!r}; accepted schemes: "
            + ", ".join(ACCEPTED_SCHEMES)
        )
    driver = _ASYNC_DRIVERS.get(parsed.drivername.lower())
    if driver is None:
        raise ValueError(
            f"unsupported database URL scheme {parsed.drivername + '://'!r} in "
            f"{redact_url(parsed)!r}; accepted schemes: " + ", ".join(ACCEPTED_SCHEMES)
        )
    return parsed.set(drivername=driver)


def is_sqlite(engine: AsyncEngine | Engine) -> bool:
    return engine.dialect.name == "sqlite"


def configure_sqlite(
    engine: AsyncEngine | Engine, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> None:
    """Apply WAL, a busy timeout, foreign keys and ``BEGIN IMMEDIATE`` to a SQLite engine
    (an AsyncEngine, or a sync one of the standard library's driver).

    Works on a borrowed engine too: connections already in its pool are set up the next time
    they are checked out. Calling it again is a no-op; on a non-SQLite engine it does nothing.
    """
    if not is_sqlite(engine):
        return
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
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
        take_turn_at_begin(gate, mode)
        begin_on_driver(conn, f"BEGIN {mode}")

    gate = attach_writer_gate(sync_engine, busy_timeout_ms)
    event.listen(sync_engine, "checkout", on_checkout)
    event.listen(sync_engine, "begin", on_begin)
    setattr(sync_engine, _CONFIGURED_FLAG, True)


def begin_on_driver(conn: Connection, sql: str) -> None:
    """Run ``sql`` (no result) on the aiosqlite connection under ``conn``, in one thread hop.

    Through the DBAPI adapter a statement costs three or four hops to aiosqlite's thread
    (cursor, execute, fetch, close), each a wake-up of that thread and then of the event loop;
    and everything a transaction does between BEGIN IMMEDIATE and COMMIT is time the write
    lock is held. A driver error becomes SQLAlchemy's exception, as through the adapter.
    """
    driver = conn.connection.driver_connection
    execute_fetchall = getattr(driver, "execute_fetchall", None)
    if execute_fetchall is None:
        conn.exec_driver_sql(sql)
        return
    try:
        _await(execute_fetchall(sql))
    except sqlite3.Error as exc:
        raise DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc


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
