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
has a ``SQLiteWriterGate`` (``writer_gate(engine)``), SQLite's write lock handed over in turn
in the process: the transaction manager's transactions take it at their BEGIN and give it back
at COMMIT/ROLLBACK, the stores' own statement groups around theirs. SQLite's busy handler
sleeps with growing pauses (1, 2, 5 ... 100 ms) and retries, so under load a waiting writer
sleeps past the moment the lock is free and the order is left to chance: measured, 10
producers committing an outbox entry each, the relay's and runner's statements waited seconds
(commit-to-handler p99 1.1-3.3 s). Handed over, the lock goes to the next writer in the next
loop iteration. The pool keeps its connections, so readers (WAL) are not held up.

Between processes (the app and a ``neverlost worker`` beside it on one file) the turn's holder
also takes an advisory lock on ``<database>-neverlost-writer.lock`` for its turn
(``_process_lock``): the kernel wakes the waiting process when the holder lets go, or dies.
Measured, 10 producers with the relay and runner in a worker process, runs interleaved:
commit-to-handler p50 85-1,330 ms and p99 0.4-2.5 s through SQLite's busy handler, p50 35-39
ms and p99 65-91 ms queued on the lock file, at the same commit rate (the p50 is mostly the
worker's 50 ms ``data_version`` watch). Relay and runner in the producers' process (two
``flock`` calls a turn, never a wait), 12 interleaved pairs: median commit rate 467 against
454/s, within the noise. A transaction opened another way (``engine.begin()`` yourself,
another tool on the file, any writer on Windows) still meets the lock in the busy handler; an
in-memory database has no lock file.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sqlite3
import time
import uuid
import weakref
from collections.abc import AsyncIterator
from contextvars import ContextVar, Token
from typing import Any, Protocol
from urllib.parse import urlencode

from loguru import logger
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

try:
    from sqlalchemy.util import await_ as _await  # SQLAlchemy 2.1
except ImportError:  # pragma: no cover - SQLAlchemy 2.0
    from sqlalchemy.util import await_only as _await

from jobs.errors import require_extra
from jobs.spi.support import redact_url

from ._process_lock import ProcessWriterLock, writer_lock_path
from ._sqlite_files import private_database_files

__all__ = [
    "ACCEPTED_SCHEMES",
    "BUSY_TIMEOUT_MS",
    "POSTGRES_POOL_SIZE",
    "SQLiteWriterGate",
    "TurnWatcher",
    "configure_sqlite",
    "create_engine",
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
_GATE_ATTRIBUTE = "_neverlost_sqlite_writer_gate"
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
        slot = _turn_slot.get()
        if slot is not None and slot.turns is None and mode != "DEFERRED":
            try:
                slot.turns = _await(gate.acquire())
            except sqlite3.OperationalError as exc:
                raise DBAPIError.instance(f"BEGIN {mode}", None, exc, sqlite3.Error) from exc
        begin_on_driver(conn, f"BEGIN {mode}")

    gate = SQLiteWriterGate(busy_timeout_ms / 1000, lock_path=writer_lock_path(engine.url))
    event.listen(sync_engine, "checkout", on_checkout)
    event.listen(sync_engine, "begin", on_begin)
    event.listen(sync_engine, "engine_disposed", lambda _engine: gate.close())
    setattr(sync_engine, _GATE_ATTRIBUTE, gate)
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


class TurnSlot:
    """The write turn of one transaction, taken at its BEGIN (see ``write_turn``)."""

    __slots__ = ("turns",)

    def __init__(self) -> None:
        self.turns: WriterTurns | None = None

    def release(self) -> None:
        turns, self.turns = self.turns, None
        if turns is not None:
            turns.release()


_turn_slot: ContextVar[TurnSlot | None] = ContextVar("neverlost_sqlite_turn", default=None)


def open_turn_slot() -> tuple[TurnSlot, Token[TurnSlot | None]]:
    """Have the next BEGIN on a configured SQLite engine in this context wait for the writer
    gate and keep the turn in the slot, until ``slot.release()`` (after COMMIT/ROLLBACK).
    Reset the token with ``close_turn_slot`` in the same context."""
    slot = TurnSlot()
    return slot, _turn_slot.set(slot)


def close_turn_slot(token: Token[TurnSlot | None]) -> None:
    _turn_slot.reset(token)


def writer_gate(engine: AsyncEngine) -> SQLiteWriterGate | None:
    """The writer gate of a SQLite engine set up by ``configure_sqlite``; None otherwise."""
    gate: SQLiteWriterGate | None = getattr(engine.sync_engine, _GATE_ATTRIBUTE, None)
    return gate


class TurnWatcher(Protocol):
    """Told when this engine's write turns begin and end (``SQLiteWriterGate.watch``): every
    commit through the engine's gated transactions falls between the two."""

    def turn_began(self) -> None: ...

    def turn_ending(self) -> None: ...


STORE_TURN_AFTER = 1
"""A waiting store group is handed the write turn after at most this many app transactions."""


class SQLiteWriterGate:
    """SQLite's one write lock, handed to this process's writers in turn.

    ``async with gate.turn():`` around ``BEGIN IMMEDIATE`` ... ``COMMIT``. A turn that ends is
    handed straight to the next waiter, no newcomer barging in (as one does with the
    ``asyncio.Queue`` of SQLAlchemy's ``AsyncAdaptedQueuePool``, whose single connection would
    also hold up readers). Two queues: app transactions in arrival order, and the stores' own
    statement groups (``store=True``: the relay's claims and marks, the job store's enqueues,
    claims and settles; each group one turn for all the callers that came in while it waited).
    While both wait they alternate (``STORE_TURN_AFTER``). Measured with 10 producers, relay and
    runner in one process (SQLite, jobs on the same file; turns counted, so the turn counts are
    exact, the rates noisy): the stores' groups in arrival order took 0.75 turns per producer
    transaction but waited behind every producer (commit-to-handler p99 430 ms); first always,
    they took 3.2 turns per producer transaction of 1.5 statements each (p99 42 ms, but half
    the commit rate); alternating, p99 80-190 ms at 0.8-1.2x the commit rate of arrival order.
    Through SQLite's busy handler it was p99 1.1-3.3 s. Waiting longer than the busy timeout
    raises what SQLite would have: ``sqlite3.OperationalError("database is locked ...")``.
    With a ``lock_path`` (a database file, see ``configure_sqlite``) a turn also holds the lock
    between processes for its length (``ProcessWriterLock``), the busy timeout counting both
    waits. State is kept per event loop (an engine may outlive one: tests, ``asyncio.run`` twice).
    """

    def __init__(self, timeout_s: float, *, lock_path: str | None = None) -> None:
        self._timeout_s = timeout_s
        self.lock_path = lock_path
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriterTurns] = (
            weakref.WeakKeyDictionary()
        )
        self._watchers: list[TurnWatcher] = []

    def watch(self, watcher: TurnWatcher) -> None:
        """Tell ``watcher`` of each turn, once it is held (between processes too) and before it
        is let go, until ``unwatch``."""
        self._watchers.append(watcher)

    def unwatch(self, watcher: TurnWatcher) -> None:
        with contextlib.suppress(ValueError):
            self._watchers.remove(watcher)

    @contextlib.asynccontextmanager
    async def turn(self, *, store: bool = False) -> AsyncIterator[None]:
        """Hold the write turn for the block (see the class)."""
        turns = await self.acquire(store=store)
        try:
            yield
        finally:
            turns.release()

    def waiting(self) -> tuple[int, int]:
        """How many wait for the turn on this event loop: (stores' groups, app transactions)."""
        turns = self._turns.get(asyncio.get_running_loop())
        return (0, 0) if turns is None else turns.waiting()

    def waits_for_another_process(self) -> bool:
        """Whether this event loop's holder of the turn waits for a writer of another process."""
        turns = self._turns.get(asyncio.get_running_loop())
        return turns is not None and turns.waits_for_another_process()

    def close(self) -> None:
        """Close the lock file of each event loop whose turn nobody holds (the engine's
        ``dispose()``; a later writer opens it again), so an engine disposed of holds no
        descriptor while it waits for the garbage collector."""
        for turns in list(self._turns.values()):
            turns.close()

    async def acquire(self, *, store: bool = False) -> WriterTurns:
        """Wait for the write turn; the object to ``release()`` when the transaction ends."""
        turns = self._loop_turns()
        await turns.acquire(store=store, timeout_s=self._timeout_s)
        return turns

    def try_acquire(self) -> WriterTurns | None:
        """The write turn if it is free at once, in this process and (``lock_path``) between
        processes, as ``acquire`` would have it; else None, and nothing held (wait with
        ``acquire``). A lone store statement takes it so, with no task to wait in."""
        turns = self._loop_turns()
        return turns if turns.try_acquire() else None

    def _loop_turns(self) -> WriterTurns:
        loop = asyncio.get_running_loop()
        turns = self._turns.get(loop)
        if turns is None:
            process = None if self.lock_path is None else ProcessWriterLock(self.lock_path)
            turns = self._turns[loop] = WriterTurns(process, self._watchers)
        return turns


class WriterTurns:
    """The write turn on one event loop: held or not, and who waits for it (two queues); and
    the lock between processes (``ProcessWriterLock``) that its holder takes next."""

    def __init__(
        self, process: ProcessWriterLock | None, watchers: list[TurnWatcher] | None = None
    ) -> None:
        self._process = process
        self._watchers = [] if watchers is None else watchers
        self._held = False
        self._passed = 0
        self._stores: collections.deque[asyncio.Future[None]] = collections.deque()
        self._others: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self, *, store: bool, timeout_s: float) -> None:
        await self._acquire(store=store, timeout_s=timeout_s)
        self._began()

    async def _acquire(self, *, store: bool, timeout_s: float) -> None:
        left_s = timeout_s
        if self._held:
            started = time.monotonic()
            await self._wait(store=store, timeout_s=timeout_s)
            left_s -= time.monotonic() - started
        else:
            self._held = True
        process = self._process
        if process is None:
            return
        try:
            if process.try_acquire():
                return
            await process.acquire(max(left_s, 0.0))
        except TimeoutError:
            self._hand_on()
            raise sqlite3.OperationalError(
                f"database is locked (waited {timeout_s:g} s for the writers of another "
                f"process, the holder of {process.path})"
            ) from None
        except OSError as exc:  # the lock file cannot be made or locked here: SQLite's lock only
            logger.warning(
                "SQLite writers of other processes will meet this one in SQLite's busy "
                "handler: cannot lock {}: {}",
                process.path,
                exc,
            )
            self._process = None
        except BaseException:
            self._hand_on()
            raise

    def try_acquire(self) -> bool:
        """Take the turn if nobody holds it here and the lock between processes is free now.
        A lock file that cannot be locked is left to ``acquire`` (which says so, once)."""
        if self._held:
            return False
        process = self._process
        if process is not None:
            try:
                if not process.try_acquire():
                    return False
            except OSError:
                return False
        self._held = True
        self._began()
        return True

    def _began(self) -> None:
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher.turn_began()

    async def _wait(self, *, store: bool, timeout_s: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._stores if store else self._others
        queue.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self._hand_on()  # handed the turn as the wait ended: pass it on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise sqlite3.OperationalError(
                    f"database is locked (waited {timeout_s:g} s for this process's other "
                    "writers; a store's statement run from inside an open transaction on the "
                    "same SQLite database waits for itself)"
                ) from None
            raise

    def waiting(self) -> tuple[int, int]:
        return (
            sum(not waiter.done() for waiter in self._stores),
            sum(not waiter.done() for waiter in self._others),
        )

    def waits_for_another_process(self) -> bool:
        return self._process is not None and self._process.waiting

    def close(self) -> None:
        if self._process is not None and not self._held:
            self._process.close()

    def release(self) -> None:
        """End the turn: the lock between processes let go, the turn handed on (``_hand_on``)."""
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher.turn_ending()
        if self._process is not None:
            self._process.release()
        self._hand_on()

    def _hand_on(self) -> None:
        """Hand the turn to the next waiter, or free it: a waiting store group once
        ``STORE_TURN_AFTER`` transactions have had the turn since it began to wait (or none
        waits), else the longest-waiting transaction."""
        self._drop_done()
        if self._stores and (self._passed >= STORE_TURN_AFTER or not self._others):
            self._passed = 0
            self._stores.popleft().set_result(None)
        elif self._others:
            self._passed += 1 if self._stores else 0
            self._others.popleft().set_result(None)
        else:
            self._held = False

    def _drop_done(self) -> None:
        for queue in (self._stores, self._others):
            while queue and queue[0].done():
                queue.popleft()


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
