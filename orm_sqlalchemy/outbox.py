"""The SQL outbox store: entries written in the caller's transaction, claimed with leases.

``append`` writes through the session open in the caller's context, so the entry commits or
rolls back with the business change; it never opens a transaction of its own. ``claim``,
``mark_published``, ``mark_published_many`` (a claimed batch), ``release`` and ``prune`` are
one statement each, its own transaction, run on driver connections of the store's own like
the job store's hot path (``_database.connections``;
the statements are in ``sql/outbox_*.sql``). Their failures are ``jobs.errors`` types
(``StoreUnavailableError``, ``StoreSchemaError``, ``DriverError``).

The claim picks entries by state (unpublished, lease free or expired), never by "id greater
than the last one seen": ids and creation times are handed out before commit, so commits
arrive out of order. PostgreSQL claims in one statement (a CTE with ``FOR UPDATE SKIP
LOCKED``, under READ COMMITTED); SQLite in one ``UPDATE ... RETURNING`` that takes the write
lock up front (one writer at a time).

On SQLite every transaction takes the write lock up front, so an app transaction that has
written holds off the relay's claims until it ends (they wait up to the busy timeout); do not
call ``claim``/``mark_published``/``release`` from inside an open transaction on the same
SQLite database, which would wait for itself.

Time is the database's clock (PostgreSQL ``now()`` in the store's statements and
``clock_timestamp()`` in an append, SQLite ``julianday('now')``) unless a ``Clock`` is given,
whose reading is then passed as a parameter (tests).

The engine is the transaction manager's, borrowed: never disposed here. It must be one the
store can open connections of its own on (sqlite+aiosqlite on a file, or postgresql+asyncpg;
not StaticPool); ``close()`` closes those connections. On PostgreSQL its pool needs room for
the app's transactions and the stores' statements (``engine.create_engine``: 20). On SQLite
the app's transactions through the manager and the store's statements take the write lock in
turn in the process (``_database.sqlite_writes``).

What an append costs the app's transaction: one INSERT, run on the session's driver
connection (aiosqlite: one hop to its thread instead of the adapter's four; asyncpg: once the
transaction is open there, ~100-200 us of CPU less than ``exec_driver_sql``), and after the
commit an in-process wake-up plus, on PostgreSQL, a coalesced NOTIFY. Measured on
PostgreSQL, 10 producers, no relay: the order INSERT plus ``append`` cost 0.93-1.12 ms of CPU
per transaction, a plain SQLAlchemy session with two Core INSERTs 1.1-1.15 ms, raw asyncpg
0.17-0.19 ms: what is left is SQLAlchemy's (session, pool, greenlet bridging per await).

The app's own sessions: ``append_in(session_or_connection, ...)`` writes the same entry, with the
same checks, through a ``Session``/``Connection`` (or ``AsyncSession``/``AsyncConnection``) the app
opened itself on the same database: a Flask view's, a script's, an async app's that has no
transaction manager of ours. It runs one INSERT there (``text()`` of the same statement, on any
driver: psycopg, pysqlite, asyncpg, aiosqlite) and leaves a callback for after that commit
(SQLAlchemy's session and connection events, ``_database.app_commits``): it wakes the store's
relay in this process (on the store's event loop, from any thread) and, on PostgreSQL, NOTIFYs
the others, from the store's loop when it runs one, else from a thread of its own on a
connection of the app's engine (a sync app has no loop). A rollback leaves no entry and wakes
nobody. A session on another database than the store's is refused before anything is written
(another SQLite file, another PostgreSQL database name, another kind of database; two names of
one server are not told apart).

Wake-up: a commit that appended through this store wakes ``wait_for_entries`` at once (an
after-commit callback); on PostgreSQL that callback also has the store NOTIFY the table's
channel, after the commit and on a connection of the store's own, coalesced
(``_database.wakeup``): a NOTIFY inside the app's transaction would take PostgreSQL's global
notify lock at its commit and serialise the app's commits. Every store LISTENing on the
channel, in any process, wakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar, overload

from loguru import logger
from pydantic import BaseModel
from sqlalchemy import URL, Connection, MetaData
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from jobs.errors import DriverError, JobOptionError
from jobs.spi import (
    OUTBOX_ENTRY_STATES,
    WORKFLOW_ENTRY_TYPE,
    OutboxEntry,
    OutboxEntryInfo,
    OutboxEntryPage,
    OutboxStats,
    OverdueEntry,
    PublishedEntry,
    RelayInfo,
    RelayRegistration,
)
from jobs.spi.support import (
    MAX_KEY_LENGTH,
    Clock,
    JobDefinition,
    JobDefinitions,
    check_delay_ms,
    check_max_attempts,
    check_name,
    check_priority,
    check_queue,
    check_run_at,
    check_timeout_ms,
    current_traceparent,
    encode_payload,
    redact_url,
    resolve_job,
)

from ._database import asyncpg_errors
from ._database.app_appends import AppAppends
from ._database.connections import Backend, PostgresBackend, Row
from ._database.errors import check_engine, store_error
from ._database.listener import listen_engine
from ._database.sqlite_writes import SQLiteBackend, sqlite_commits
from ._database.statements import load_statements, text_statement
from ._database.wakeup import PostgresWakeups
from .engine import is_sqlite
from .rows import (
    outbox_entry,
    outbox_entry_info,
    overdue_entry,
    published_entry,
    relay_info,
)
from .tables import (
    add_missing_columns,
    check_columns,
    column_names,
    create_missing,
    lock_for_creation,
    outbox_schema,
)
from .transactions import SQLAlchemyTransactionManager, transaction_manager_of

__all__ = ["DEFAULT_MAX_PAYLOAD_BYTES", "SQLAlchemyOutboxStore"]

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
_LISTEN_RETRY_S = 5.0
M = TypeVar("M", bound=BaseModel)


class WorkflowSteps(Protocol):
    """What ``append_workflow`` reads of a ``jobs.workflow.Workflow`` (a driver package does not
    import the engine's modules): its steps, each a ``job`` (``NewJob``), the indexes of the
    steps it runs ``after`` and its ``on_failure``."""

    def steps(self) -> Sequence[Any]: ...
PRUNE_BATCH = 1_000
"""At most this many published entries are deleted by one ``prune()``."""
_PG_CONNECTIONS = 4
"""At most this many PostgreSQL connections run the store's statements (a relay uses one)."""


def _read_cursor(cursor: str | None) -> tuple[int, str]:
    """A ``list_entries`` cursor (``<created_at>:<id>``) as the page's lower bound."""
    if cursor is None:
        return -1, ""
    at, sep, entry_id = cursor.partition(":")
    if not sep or not at.lstrip("-").isdigit():
        raise ValueError(f"not a cursor of list_entries: {cursor!r}")
    return int(at), entry_id


def _driver_connection(session: Session) -> Any:
    """The driver connection under ``session``'s transaction, begun if it was not (run with
    ``AsyncSession.run_sync``: one greenlet spawn, ~11 us of CPU, against ~22 us for
    ``session.connection()`` and then ``get_raw_connection()``, two spawns; measured in a loop)."""
    return session.connection().connection.driver_connection


async def _append_on_aiosqlite(driver: Any, sql: str, params: dict[str, Any]) -> Any:
    """The append on the session's aiosqlite connection itself: one hop to its thread, not the
    DBAPI adapter's four (cursor, execute, fetch, close), while the transaction holds SQLite's
    write lock. The transaction is the session's: its ``BEGIN IMMEDIATE`` has run (the engine's
    ``begin`` listener, ``configure_sqlite``), and the driver runs in autocommit otherwise."""
    try:
        rows = await driver.execute_fetchall(sql, params)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(sql, params, exc, sqlite3.Error) from exc
    return rows[0][0] if rows else None


async def _append_on_asyncpg(
    session: AsyncSession, driver: Any, sql: str, args: tuple[Any, ...]
) -> Any:
    """The append on the session's asyncpg connection itself, once the transaction is open on
    the server (asyncpg's ``is_in_transaction()``): one round trip either way, and ~100-200 us
    of CPU less than through the DBAPI adapter and its result objects (measured, 10 producers).
    SQLAlchemy's adapter sends BEGIN with the transaction's first statement, so an append that
    is the first goes through ``exec_driver_sql``, which opens it."""
    if not driver.is_in_transaction():
        conn = await session.connection()
        result = await conn.exec_driver_sql(sql, args)
        return result.scalar()
    try:
        return await driver.fetchval(sql, *args)
    except asyncpg_errors.PostgresError as exc:
        raise DBAPIError(sql, args, exc) from exc


class SQLAlchemyOutboxStore:
    """An ``OutboxStore`` on the engine of ``transaction_manager`` (SQLite or PostgreSQL).

    ``transaction_manager`` may also be an AsyncEngine (borrowed: it stays open) or a database
    URL (``create_engine``'s; the store owns that engine and disposes it on ``close()``); the
    store then has a manager of its own on that engine (``transaction_manager``), for
    ``append``. ``append_in`` needs none: it joins a session of the app's.

    ``table_prefix`` names the table (``<prefix>entries``), ``schema`` its PostgreSQL schema and
    ``metadata`` the MetaData to hold it (yours, for Alembic). ``clock`` replaces the
    database's clock (tests). ``listen_url`` gives LISTEN a direct connection when the
    engine goes through a pooler in transaction mode (see the job store).

    ``definitions`` (the handler registry, any ``JobDefinitions``) types appends by name: an
    entry appended as ``"receipt.send"`` whose type has a definition there is validated
    against its model, as if the definition had been given. In an application context the
    handler registry hands itself over when it starts (``use_definitions``); without one (a
    producer-only app, a store made by hand) a type name is checked as JSON only.
    """

    def __init__(
        self,
        transaction_manager: SQLAlchemyTransactionManager | AsyncEngine | str | URL,
        *,
        table_prefix: str = "outbox_",
        clock: Clock | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        metadata: MetaData | None = None,
        schema: str | None = None,
        listen_url: str | None = None,
        definitions: JobDefinitions | None = None,
    ) -> None:
        self._definitions = definitions
        self._tm, self._owned_engine = transaction_manager_of(
            transaction_manager, store="SQLAlchemyOutboxStore"
        )
        self._engine = self._tm.engine
        check_engine(self._engine, store="SQLAlchemyOutboxStore")
        self._schema = outbox_schema(table_prefix, metadata, schema=schema)
        self._table = self._schema.entries
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        dialect = self._engine.dialect
        self._postgres = dialect.name == "postgresql"
        self._sqlite = is_sqlite(self._engine)
        url_text = redact_url(self._engine.url)
        self._name = f"SQLAlchemyOutboxStore({url_text}, table {self._table.fullname})"
        quoted_table = dialect.identifier_preparer.format_table(self._table)
        self._sql = load_statements(dialect.name, quoted_table, resource="outbox") | (
            load_statements(
                dialect.name,
                dialect.identifier_preparer.format_table(self._schema.relays),
                resource="relays",
            )
        )
        self._sql.update(load_statements(dialect.name, quoted_table, resource="outbox_audit"))
        self._backend: Backend
        self._wakeups: PostgresWakeups | None = None
        self._listen_engine = listen_engine(
            listen_url, postgres=self._postgres, store="SQLAlchemyOutboxStore"
        )
        if self._postgres:
            backend = PostgresBackend(self._engine, size=_PG_CONNECTIONS, name=self._name)
            self._wakeups = PostgresWakeups(
                backend,
                listen_engine=self._listen_engine,
                channel=self._schema.notify_channel,
                name=self._name,
                on_wake=self._notified,
            )
            self._backend = backend
        else:
            self._backend = SQLiteBackend(self._engine, name=self._name)
        self._commits = None if self._postgres else sqlite_commits(self._engine)
        self._schema_ready = False
        self._app_appends = AppAppends(
            self,
            text_statement(dialect.name, quoted_table, "append", resource="outbox"),
            channel=self._schema.notify_channel if self._postgres else None,
        )
        self._schema_lock = asyncio.Lock()
        self._instance = uuid.uuid4().hex
        self._session_flag = f"neverlost_outbox_appended:{self._instance}"
        self._signal = asyncio.Event()
        self._listen_failed_at: float | None = None
        self._listen_lost = False
        self._closed = False
        subscribe: Callable[[Callable[[], None]], Callable[[], None]] | None = getattr(
            clock, "subscribe", None
        )
        # A manual clock that moves may make a released entry due: wake the waiters.
        self._unsubscribe = subscribe(self._signal.set) if subscribe is not None else None

    def __repr__(self) -> str:
        return self._name

    def use_definitions(self, definitions: JobDefinitions | None) -> None:
        """Validate appends by type name against ``definitions`` from now on (None: stop)."""
        self._definitions = definitions

    @property
    def metadata(self) -> MetaData:
        return self._schema.metadata

    @property
    def transaction_manager(self) -> SQLAlchemyTransactionManager:
        """The manager whose transactions ``append`` writes in."""
        return self._tm

    @property
    def table_name(self) -> str:
        return self._table.name

    async def create_schema(self) -> None:
        """Create the outbox table and its indexes if they do not exist."""
        try:
            async with self._engine.connect() as conn:
                if self._postgres:
                    conn = await conn.execution_options(isolation_level="READ COMMITTED")
                async with conn.begin():
                    await self._ensure_schema(conn)
        except Exception as exc:
            raise store_error(exc, self._name) from exc
        self._mark_schema_ready()

    @overload
    async def append(
        self,
        type: JobDefinition[M],
        payload: M | Mapping[str, Any],
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    @overload
    async def append(
        self,
        type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    async def append(
        self,
        type: str | JobDefinition[Any],
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None:
        """Insert an entry through the caller's open transaction; its id, or None when an
        entry with ``key`` is already in the outbox (``INSERT ... ON CONFLICT DO NOTHING``).
        The entry keeps the caller's trace context (W3C traceparent), so the relay's publish
        continues its trace.

        The job is due ``delay_ms`` after this append by the database's clock (PostgreSQL
        ``clock_timestamp()``, SQLite's ``julianday('now')``): the entry stores that absolute
        time, and the job is due then however late the relay publishes it. It is the append
        statement's time, so within the transaction's duration of its commit. Or ``run_at``
        (an aware datetime); neither: due when published. ``max_attempts`` is carried to the
        job (a handler's own still wins), and ``priority`` and ``queue`` (None: the handler's
        default).

        ``type`` is a job type or a job definition, whose model validates ``payload`` here; a
        type name with a definition in the store's ``definitions`` is validated the same way.
        Raises PayloadValidationError, PayloadError (naming the path), JobTypeError or
        JobOptionError (``jobs.options``) before anything is written, and NoTransactionError
        when no transaction of this store's manager is open here.
        """
        params = self._entry(
            type,
            payload,
            key=key,
            delay_ms=delay_ms,
            run_at=run_at,
            max_attempts=max_attempts,
            priority=priority,
            queue=queue,
        )
        return await self._insert(params)

    async def append_workflow(
        self, workflow: WorkflowSteps, *, key: str | None = None
    ) -> str | None:
        """Write ``workflow`` (``jobs.workflow``: ``chain``, ``group``, ``Workflow``) through the
        caller's open transaction as one entry (``jobs.spi.WORKFLOW_ENTRY_TYPE``); its id, or
        None when an entry with ``key`` is already in the outbox. The relay hands it over as
        one ``enqueue_workflow`` under the entry's workflow id (``outbox_workflow_id``), so the
        workflow exists if and only if the transaction committed, and once.

        Checked whole before anything is written: WorkflowError for an empty workflow, a cycle
        or a keyed job; each job's type, payload and options as ``append`` checks them. Each
        job's ``delay_ms`` counts from the hand-over (``run_at`` is absolute); the whole
        workflow's JSON is bounded by ``max_payload_bytes``.
        """
        jobs = []
        for step in workflow.steps():
            job = step.job
            checked = self._entry(
                job.type,
                job.payload,
                key=None,
                delay_ms=job.delay_ms,
                run_at=job.run_at,
                max_attempts=job.max_attempts,
                priority=job.priority,
                queue=job.queue,
            )
            timeout_ms = job.timeout_ms
            jobs.append(
                {
                    "type": checked["type"],
                    "payload": json.loads(checked["payload"]),
                    "after": list(step.after),
                    "on_failure": step.on_failure,
                    "delay_ms": checked["delay_ms"],
                    "run_at_ms": checked["run_at"],
                    "max_attempts": checked["max_attempts"],
                    "priority": checked["priority"],
                    "queue": checked["queue"],
                    "timeout_ms": None if timeout_ms is None else check_timeout_ms(timeout_ms),
                }
            )
        params = self._entry(
            WORKFLOW_ENTRY_TYPE,
            {"jobs": jobs},
            key=key,
            delay_ms=None,
            run_at=None,
            max_attempts=None,
        )
        return await self._insert(params)

    async def _insert(self, params: dict[str, Any]) -> str | None:
        """Insert a checked entry (``_entry``) through the caller's open transaction."""
        session = self._tm.session
        if not self._schema_ready:
            await self._ensure_schema(await session.connection())
            self._tm.after_commit(self._mark_schema_ready)
        driver = await session.run_sync(_driver_connection)
        entry_id: str = params["id"]
        append = self._sql["append"]
        # The statement as text, not a Core construct: it runs inside every app transaction
        # that appends, and Core's construct, cache key and compile cost ~1 ms of CPU a call
        # here against ~0.3 ms for the driver statement (measured, 20 concurrent producers).
        if self._sqlite:
            inserted = await _append_on_aiosqlite(driver, append.text, params)
        else:
            inserted = await _append_on_asyncpg(session, driver, append.text, append.bind(params))
        if inserted is None:
            return None
        if not session.info.get(self._session_flag):
            session.info[self._session_flag] = True
            self._tm.after_commit(self._on_commit)
        return entry_id

    @overload
    def append_in(
        self,
        session: Session | Connection,
        type: JobDefinition[M],
        payload: M | Mapping[str, Any],
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    @overload
    def append_in(
        self,
        session: Session | Connection,
        type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    @overload
    def append_in(
        self,
        session: AsyncSession | AsyncConnection,
        type: JobDefinition[M],
        payload: M | Mapping[str, Any],
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> Awaitable[str | None]: ...

    @overload
    def append_in(
        self,
        session: AsyncSession | AsyncConnection,
        type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> Awaitable[str | None]: ...

    def append_in(
        self,
        session: Session | Connection | AsyncSession | AsyncConnection,
        type: str | JobDefinition[Any],
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | Awaitable[str | None] | None:
        """``append`` through a session or connection the app opened itself, on the store's
        database: the entry commits or rolls back with the app's transaction.

        A sync ``Session``/``Connection`` returns the entry's id (None for a duplicate
        ``key``); an ``AsyncSession``/``AsyncConnection`` returns an awaitable of it
        (``await outbox.append_in(session, ...)``). The checks are ``append``'s, made here,
        before anything is written (PayloadValidationError, PayloadError, JobTypeError,
        JobOptionError); the entry keeps the caller's trace context. Nothing else runs in the
        app's transaction: once it commits, the relay is woken (here and, on PostgreSQL, in
        other processes); a rollback wakes nobody. A session bound to another database than
        the store's is a ValueError naming both. The outbox table is created in the app's
        transaction if missing, as ``append`` does.
        """
        if not isinstance(session, Session | Connection | AsyncSession | AsyncConnection):
            raise TypeError(
                "append_in takes a SQLAlchemy Session, Connection, AsyncSession or "
                f"AsyncConnection, got {session!r}"
            )
        params = self._entry(
            type,
            payload,
            key=key,
            delay_ms=delay_ms,
            run_at=run_at,
            max_attempts=max_attempts,
            priority=priority,
            queue=queue,
        )
        appends = self._app_appends
        if isinstance(session, AsyncSession):
            appends.check_database(session.sync_session.get_bind())
            return session.run_sync(appends.in_session, params)
        if isinstance(session, AsyncConnection):
            appends.check_database(session.sync_engine)
            return session.run_sync(appends.in_connection, params)
        if isinstance(session, Session):
            appends.check_database(session.get_bind())
            return appends.in_session(session, params)
        appends.check_database(session.engine)
        return appends.in_connection(session, params)

    def _entry(
        self,
        type: str | JobDefinition[Any],
        payload: Any,
        *,
        key: str | None,
        delay_ms: int | None,
        run_at: datetime | None,
        max_attempts: int | None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> dict[str, Any]:
        """The checked parameters of one entry's INSERT (``append`` and ``append_in``): raises
        before anything is written."""
        job_type, payload = resolve_job(type, payload, "outbox entry type", self._definitions)
        if key is not None:
            check_name("key", key, MAX_KEY_LENGTH)
        run_at_ms = None
        if delay_ms is not None:
            delay_ms = check_delay_ms(delay_ms)
            if run_at is not None:
                raise JobOptionError(
                    f"give delay_ms or run_at, not both (got delay_ms={delay_ms} and "
                    f"run_at={run_at!r})",
                    option="run_at",
                    value=run_at,
                )
        elif run_at is not None:
            run_at_ms = check_run_at(run_at)
        if max_attempts is not None:
            max_attempts = check_max_attempts(max_attempts)
        if priority is not None:
            priority = check_priority(priority)
        if queue is not None:
            queue = check_queue(queue)
        return {
            "id": str(uuid.uuid4()),
            "type": job_type,
            "payload": encode_payload(payload, max_bytes=self._max_payload_bytes),
            "key": key,
            "delay_ms": delay_ms,
            "run_at": run_at_ms,
            "max_attempts": max_attempts,
            "priority": priority,
            "queue": queue,
            "trace_context": current_traceparent(),
            "now": None if self._clock is None else self._clock.now_ms(),
        }

    async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
        """Lease up to ``limit`` claimable entries for ``lease_ms``, oldest first."""
        if limit <= 0:
            return []
        if lease_ms <= 0:
            raise ValueError(f"lease_ms must be positive, got {lease_ms}")
        if self._postgres and not self._closed:
            # Listen before claiming, so no commit after this claim goes unheard.
            await self._ensure_listening(wake_on_reconnect=False)
        rows = await self._fetch(
            "claim", limit=limit, lease_ms=lease_ms, token=secrets.token_hex(12)
        )
        entries = [outbox_entry(row) for row in rows]
        entries.sort(key=lambda entry: (entry.created_at, entry.id))
        return entries

    async def mark_published(self, entry_id: str, lease_token: str) -> bool:
        """Mark a leased entry published; False, writing nothing, if ``lease_token`` is stale."""
        return bool(await self._fetch("mark_published", id=entry_id, lease_token=lease_token))

    async def mark_published_many(self, entries: Sequence[OutboxEntry]) -> list[str]:
        """Mark leased entries published in one statement; the ids marked (an entry whose
        lease token is stale is left as it is)."""
        if not entries:
            return []
        pairs = json.dumps([[entry.id, entry.lease_token] for entry in entries])
        return [row["id"] for row in await self._fetch("mark_published_many", entries=pairs)]

    async def release(self, entry_id: str, lease_token: str, *, delay_ms: int, error: str) -> bool:
        """Make a leased entry claimable again after ``delay_ms``; False if the token is stale."""
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be non-negative, got {delay_ms}")
        rows = await self._fetch(
            "release",
            id=entry_id,
            lease_token=lease_token,
            delay_ms=delay_ms,
            # PostgreSQL text cannot hold NUL; an error message might.
            error=error.replace("\x00", "\\u0000"),
        )
        return bool(rows)

    async def prune(self, older_than_ms: int) -> int:
        """Delete entries published more than ``older_than_ms`` ago, oldest first and at most
        ``PRUNE_BATCH`` of them (one short write: on SQLite the app's commits wait for it);
        how many were deleted."""
        if older_than_ms < 0:
            raise ValueError(f"older_than_ms must not be negative, got {older_than_ms}")
        return len(await self._fetch("prune", older_than_ms=older_than_ms, batch=PRUNE_BATCH))

    async def oldest_unpublished_age_ms(self) -> int | None:
        """How long the oldest unpublished entry has waited (ms, by the store's clock); None
        when every entry is published. Read by the ``outbox.lag`` metric."""
        rows = await self._fetch("oldest_unpublished_age")
        age = rows[0]["age_ms"] if rows else None
        return None if age is None else max(int(age), 0)

    async def overdue_entries(self, older_than_ms: int, limit: int) -> list[OverdueEntry]:
        """Up to ``limit`` unpublished entries appended more than ``older_than_ms`` ago, oldest
        first (``jobs.spi.OutboxAuditReads``, for the live loss auditor): one statement over
        the unpublished entries, as ``oldest_unpublished_age_ms``."""
        rows = await self._fetch("audit_overdue", older_than_ms=older_than_ms, limit=limit)
        return [overdue_entry(row) for row in rows]

    async def published_entries(
        self, *, after_ms: int, after_id: str = "", limit: int
    ) -> list[PublishedEntry]:
        """Up to ``limit`` entries published after ``(after_ms, after_id)``, in publishing
        order (``jobs.spi.OutboxAuditReads``): a range of the index on ``published_at``."""
        rows = await self._fetch(
            "audit_published", after_ms=after_ms, after_id=after_id, limit=limit
        )
        return [published_entry(row) for row in rows]

    # -- for operators (OutboxOperations) -----------------------------------------------------

    async def outbox_stats(self) -> OutboxStats:
        """Unpublished entries (how many, the oldest one's age, how many failed a hand-over)
        and how many were published in the last hour; two index-backed counts."""
        row = (await self._fetch("outbox_stats"))[0]
        age = row["oldest_age_ms"]
        return OutboxStats(
            unpublished=int(row["unpublished"]),
            oldest_age_ms=None if age is None else max(int(age), 0),
            with_errors=int(row["with_errors"] or 0),
            published_last_hour=int(row["published_last_hour"]),
        )

    async def register_relay(self, relay: RelayRegistration, ttl_ms: int) -> None:
        """Record or refresh a live relay for ``ttl_ms`` (the ``<prefix>relays`` table)."""
        if ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be positive, got {ttl_ms}")
        await self._fetch(
            "register_relay", id=relay.id, host=relay.host, pid=relay.pid, ttl_ms=ttl_ms
        )

    async def deregister_relay(self, relay_id: str) -> None:
        await self._fetch("deregister_relay", id=relay_id)

    async def list_relays(self) -> list[RelayInfo]:
        """The live relays by start time; expired records are deleted in passing."""
        if not self._postgres:  # PostgreSQL deletes them in the listing's statement
            await self._fetch("prune_relays")
        return [relay_info(row) for row in await self._fetch("list_relays")]

    async def list_entries(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> OutboxEntryPage:
        """Entries oldest first (by ``created_at``, then id), ``limit`` at most (1-1000)."""
        if state is not None and state not in OUTBOX_ENTRY_STATES:
            raise ValueError(
                f"state must be one of {', '.join(OUTBOX_ENTRY_STATES)} (or None), got {state!r}"
            )
        if not 1 <= limit <= 1_000:
            raise ValueError(f"limit must be between 1 and 1000, got {limit}")
        after_at, after_id = _read_cursor(cursor)
        rows = await self._fetch(
            "list_entries", state=state, type=type, after_at=after_at, after_id=after_id,
            limit=limit + 1,
        )  # fmt: skip
        entries = [outbox_entry_info(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = f"{int(last['created_at'])}:{last['id']}"
        return OutboxEntryPage(entries=entries, next_cursor=next_cursor)

    async def get_entry(self, entry_id: str) -> OutboxEntryInfo | None:
        rows = await self._fetch("get_entry", id=entry_id)
        return outbox_entry_info(rows[0]) if rows else None

    async def retry_entry(self, entry_id: str) -> bool:
        """Make an unpublished entry claimable now; False if it is published or unknown."""
        return bool(await self._fetch("retry_entry", id=entry_id))

    async def wait_for_entries(self, timeout_ms: int) -> None:
        """Return after a commit that appended (here, or on PostgreSQL anywhere; on SQLite any
        commit to the file by another connection, ``_database.sqlite_writes.commits``), or timeout.

        Returns at once if such a commit happened since the last call; an idle store waits the
        whole ``timeout_ms``.
        """
        self._app_appends.loop = asyncio.get_running_loop()
        if self._postgres and not self._closed:
            await self._ensure_listening(wake_on_reconnect=True)
        if self._commits is not None:
            await self._commits.wait(self._signal, max(timeout_ms, 0) / 1000)
        elif not self._signal.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(timeout_ms, 0) / 1000):
                    await self._signal.wait()
        self._signal.clear()

    async def close(self) -> None:
        """Stop listening, unsubscribe from the clock and close the store's connections (the
        engine is the manager's: it stays open). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._wakeups is not None:
            await self._wakeups.close()
        await self._backend.close()
        if self._commits is not None:
            await self._commits.close()
        if self._listen_engine is not None:
            await self._listen_engine.dispose()
        await asyncio.to_thread(self._app_appends.close)
        if self._owned_engine is not None:
            await self._owned_engine.dispose()

    def _on_commit(self) -> None:
        """After a commit that appended: wake this store's relay, and others' by NOTIFY."""
        self._signal.set()
        if self._wakeups is not None and not self._closed:
            self._wakeups.announce()

    async def _fetch(self, statement: str, **params: Any) -> list[Row]:
        """Run one of the store's statements (its own transaction) on its own connections."""
        if self._closed:
            raise DriverError(f"{self._name} is closed")
        if not self._schema_ready:
            async with self._schema_lock:
                if not self._schema_ready:
                    await self.create_schema()
        params["now"] = None if self._clock is None else self._clock.now_ms()
        return await self._backend.fetch(self._sql[statement], params)

    async def _ensure_schema(self, conn: AsyncConnection) -> None:
        """Create the table if missing, in ``conn``'s transaction.

        The caller records it ready only after that transaction commits: a rollback takes
        the new table with it.
        """
        await lock_for_creation(conn, "outbox", self._table.fullname)
        await conn.run_sync(self._create_and_check)

    def _create_and_check(self, connection: Connection) -> None:
        """Create the entries and relays tables unless they exist; add the columns a later
        version gave the entries (``add_missing_columns``: ``run_at``, ``max_attempts``,
        ``priority``); StoreSchemaError if one still lacks a column."""
        relays = self._schema.relays
        if column_names(connection, relays) is None:
            create_missing(connection, {relays: None})
        table = self._table
        columns = column_names(connection, table)
        if columns is None:
            create_missing(connection, {table: None})
            return
        columns.extend(add_missing_columns(connection, table, columns))
        check_columns(table, columns, store="outbox store", connection=connection)

    def _mark_schema_ready(self) -> None:
        self._schema_ready = True

    async def _ensure_listening(self, *, wake_on_reconnect: bool) -> None:
        """Listen, best effort: without it the relay polls, so a failure is logged and
        retried at most every few seconds, never raised. A wait that reconnects after a loss
        wakes the relay (a commit may have gone unheard); a claim reads anyway, so it does not.
        """
        now = time.monotonic()
        if self._listen_failed_at is not None and now - self._listen_failed_at < _LISTEN_RETRY_S:
            return
        if self._wakeups is None:
            return
        try:
            reconnected = await self._wakeups.listen()
        except Exception as exc:
            self._listen_failed_at, self._listen_lost = now, True
            logger.warning("outbox LISTEN unavailable, relying on polling: {error!r}", error=exc)
            return
        if reconnected and self._listen_lost and wake_on_reconnect:
            self._signal.set()
        self._listen_failed_at, self._listen_lost = None, False

    def _notified(self, detail: str | None) -> None:
        """Another store's commit appended (or, with None, the LISTEN connection was lost)."""
        if detail is None:
            self._listen_lost = True
        self._signal.set()
