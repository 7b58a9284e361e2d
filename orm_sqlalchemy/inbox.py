"""``SQLAlchemyInbox``: a handler's database effects committed once per job.

``async with inbox.once(ctx) as first:`` opens a transaction of the inbox's manager (or joins
the one open in this context) and inserts the job's identity into the inbox table in it
(``INSERT ... ON CONFLICT DO NOTHING``). ``first`` is False when an earlier execution of the job
already committed that row: the handler skips its effects. The effects written in the block
(through ``tm.session`` / ``current_session()``) and the row commit together or not at all; an
exception in the block rolls both back, so a retry runs again.

Concurrent executions of one job (a stale worker and the lease's new holder) serialise on the
row: on PostgreSQL the second INSERT waits for the first transaction and then finds the row (or
inserts it, if the first rolled back); on SQLite transactions are one at a time already (the
manager's writer gate in the process, the lock file and ``BEGIN IMMEDIATE`` between processes).

The identity is the job's key when it has one (``key:<key>``: a repeat of the same logical job
within the retention, such as an outbox entry published twice, is the same job), else its id
(``id:<id>``). Rows are kept ``retain_ms`` (default 7 days) and deleted by ``purge()`` and, in
passing, at most once per ``prune_interval_ms`` after a commit.

When the runner's job store is on the same database and implements the SPI's
``CompletesInTransaction`` (``SQLAlchemyJobStore`` does), the block's transaction also completes
the job, fenced by its lease token, and the runner settles nothing afterwards: a crash after the
commit cannot run the job again.

Sync code (a ``def`` handler, in its worker thread) has ``with inbox.once_sync(ctx) as
first:``: the same, through a sync ``Session`` — the app's (``session=``), or one the inbox
opens on a sync engine (``sync_engine=``, else made from the async engine's URL with
``create_sync_engine`` on first use: sqlite3 or psycopg 3), whose session the handler reaches
as ``inbox.sync_session``. ``@job_handler(..., inbox=...)`` on a ``def`` handler runs it in
``once_sync(ctx)``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from loguru import logger
from sqlalchemy import URL, Connection, Engine, MetaData, Table, delete
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from jobs.spi import AttemptSettlement, CompletesInTransaction, InboxJob
from jobs.spi.support import redact_url

from ._database.app_appends import other_database
from ._database.app_commits import after_connection_commit, after_session_commit
from .engine import create_sync_engine
from .tables import (
    check_columns,
    column_names,
    create_missing,
    inbox_schema,
    lock_for_creation_sync,
)
from .transactions import SQLAlchemyTransactionManager, transaction_manager_of

__all__ = ["DEFAULT_INBOX_RETAIN_MS", "SQLAlchemyInbox", "inbox_identity"]

AfterCommit = Callable[[Callable[[], None]], None]
"""Registers a callback for after the transaction's commit (the manager's, or the app's)."""

DEFAULT_INBOX_RETAIN_MS = 7 * 24 * 3600 * 1000
"""How long a processed job's row is kept: a re-delivery later than this runs again."""


def inbox_identity(job: InboxJob) -> str:
    """The row's key for ``job``: ``key:<key>`` when it has a key, else ``id:<id>``."""
    return f"key:{job.key}" if job.key is not None else f"id:{job.id}"


class SQLAlchemyInbox:
    """The inbox table ``<prefix>inbox`` on the database of ``transaction_manager``.

    ``transaction_manager`` is the app's ``SQLAlchemyTransactionManager`` (``once`` joins its
    open transaction), or an AsyncEngine (borrowed) or a URL (owned, disposed by ``close()``),
    for which the inbox makes a manager of its own (``transaction_manager``). ``table_prefix``,
    ``schema`` and ``metadata`` place the table (yours, for Alembic); ``create_tables=False``
    only checks it. ``retain_ms``: how long a row is kept. ``sync_engine``: the app's sync
    ``Engine`` on the same database, for ``once_sync`` without a session (default: one the
    inbox makes from the async engine's URL on first use, disposed by ``close()``).
    """

    def __init__(
        self,
        transaction_manager: SQLAlchemyTransactionManager | AsyncEngine | str | URL,
        *,
        table_prefix: str = "neverlost_",
        schema: str | None = None,
        metadata: MetaData | None = None,
        retain_ms: int = DEFAULT_INBOX_RETAIN_MS,
        prune_interval_ms: int | None = 60_000,
        create_tables: bool = True,
        sync_engine: Engine | None = None,
    ) -> None:
        if type(retain_ms) is not int or retain_ms < 1:
            raise ValueError(f"retain_ms must be a positive int, got {retain_ms!r}")
        self._tm, self._owned_engine = transaction_manager_of(
            transaction_manager, store="SQLAlchemyInbox"
        )
        self._schema = inbox_schema(table_prefix, metadata, schema=schema)
        dialect = self._tm.engine.dialect.name
        if dialect not in ("postgresql", "sqlite"):
            raise ValueError(f"SQLAlchemyInbox supports PostgreSQL and SQLite, not {dialect!r}")
        self._postgres = dialect == "postgresql"
        self._retain_ms = retain_ms
        self._prune_interval_s = None if prune_interval_ms is None else prune_interval_ms / 1000
        self._next_prune = time.monotonic() + (self._prune_interval_s or 0)
        self._create_tables = create_tables
        self._ready = False
        if sync_engine is not None:
            if not isinstance(sync_engine, Engine):
                raise TypeError(f"sync_engine takes a sync Engine, got {sync_engine!r}")
            self._check_database(sync_engine)
        self._sync_engine = sync_engine
        self._owned_sync_engine: Engine | None = None
        self._sync_engine_lock = threading.Lock()
        self._sync_session: ContextVar[Session | None] = ContextVar(
            "neverlost_inbox_sync_session", default=None
        )
        table = self._schema.processed
        self._insert = (
            (postgresql_insert if self._postgres else sqlite_insert)(table)
            .on_conflict_do_nothing()
            .returning(table.c.identity)
        )
        """Made once: executed with each job's values (compiled once, from the cache)."""

    def __repr__(self) -> str:
        return f"SQLAlchemyInbox({self._schema.processed.fullname})"

    @property
    def transaction_manager(self) -> SQLAlchemyTransactionManager:
        return self._tm

    @property
    def table(self) -> Table:
        return self._schema.processed

    @property
    def metadata(self) -> MetaData:
        """The MetaData holding the inbox table, for Alembic (``target_metadata``)."""
        return self._schema.metadata

    @property
    def session(self) -> AsyncSession:
        """The session of the transaction open in this context (``once``'s)."""
        return self._tm.session

    @property
    def sync_session(self) -> Session:
        """The ``Session`` of the ``once_sync`` block open in this thread (one the inbox
        opened): a ``def`` handler with ``inbox=`` writes its effects through it."""
        session = self._sync_session.get()
        if session is None:
            raise RuntimeError(
                f"{self!r}.sync_session is used outside a once_sync(ctx) block (or in one given "
                "session=: use that session)"
            )
        return session

    @asynccontextmanager
    async def once(
        self, ctx: InboxJob, *, session: AsyncSession | AsyncConnection | None = None
    ) -> AsyncIterator[bool]:
        """Open (or join) the transaction and record ``ctx``'s job in it; yields whether this is
        the first execution of the job to get there (False: an earlier one committed).

        When the block ends without an exception, the job is completed in the same transaction
        if its store shares the database (see the module's docs). ``session``: an
        ``AsyncSession`` or ``AsyncConnection`` the app opened itself, on the inbox's database,
        whose transaction is used instead (the app commits it, or rolls it back)."""
        if session is not None:
            async with self._in_apps(ctx, session) as first:
                yield first
            return
        async with self._tm.transaction() as own:
            first = await self._record(own, ctx, self._tm.after_commit)
            yield first
            await self._complete(own, ctx.settlement, self._tm.after_commit)
            if self._prune_due():
                self._tm.after_commit(self._prune_in_passing)

    @asynccontextmanager
    async def _in_apps(
        self, ctx: InboxJob, session: AsyncSession | AsyncConnection
    ) -> AsyncIterator[bool]:
        if isinstance(session, AsyncSession):
            sync_session = session.sync_session
            self._check_database(sync_session.get_bind())

            def after_commit(callback: Callable[[], object]) -> None:
                after_session_commit(sync_session, callback, lambda: _call(callback))

        elif isinstance(session, AsyncConnection):
            sync_connection = session.sync_connection
            assert sync_connection is not None
            self._check_database(sync_connection.engine)

            def after_commit(callback: Callable[[], object]) -> None:
                after_connection_commit(sync_connection, callback, lambda: _call(callback))

        else:
            raise TypeError(
                f"once(session=...) takes an AsyncSession or an AsyncConnection, got {session!r}"
            )
        first = await self._record(session, ctx, after_commit)
        yield first
        await self._complete(session, ctx.settlement, after_commit)

    @contextmanager
    def once_sync(
        self, ctx: InboxJob, *, session: Session | Connection | None = None
    ) -> Iterator[bool]:
        """``once`` for sync code (a ``def`` handler's thread): record ``ctx``'s job in a sync
        transaction and yield whether this execution is the first to get there.

        ``session``: a ``Session`` or ``Connection`` the app opened on the inbox's database,
        whose transaction is used (the app commits it, or rolls it back). Without it the inbox
        opens a ``Session`` on its sync engine (see the class), reachable as ``sync_session``
        in the block, and commits it as the block ends. Either way the job is completed in that
        transaction when its store shares the database."""
        if session is not None:
            with self._in_apps_sync(ctx, session) as first:
                yield first
            return
        with Session(self._sync()) as own, own.begin():
            token = self._sync_session.set(own)
            try:
                after_commit = _session_after_commit(own)
                first = self._record_sync(own, ctx, after_commit)
                yield first
                self._complete_sync(own, ctx.settlement, after_commit)
            finally:
                self._sync_session.reset(token)
        if self._prune_due():
            self._prune_sync()

    @contextmanager
    def _in_apps_sync(self, ctx: InboxJob, session: Session | Connection) -> Iterator[bool]:
        if isinstance(session, Session):
            self._check_database(session.get_bind())
            after_commit = _session_after_commit(session)
        elif isinstance(session, Connection):
            self._check_database(session.engine)
            after_commit = _connection_after_commit(session)
        else:
            raise TypeError(
                f"once_sync(session=...) takes a Session or a Connection, got {session!r}"
            )
        first = self._record_sync(session, ctx, after_commit)
        yield first
        self._complete_sync(session, ctx.settlement, after_commit)

    def _sync(self) -> Engine:
        engine = self._sync_engine
        if engine is None:
            with self._sync_engine_lock:
                engine = self._sync_engine
                if engine is None:
                    engine = create_sync_engine(self._tm.engine.url)
                    self._sync_engine = self._owned_sync_engine = engine
        return engine

    def _check_database(self, bind: Any) -> None:
        engine = getattr(bind, "engine", bind)
        problem = other_database(self._tm.engine.url, engine.url)
        if problem is not None:
            raise ValueError(
                f"once(session=...): the session is on {redact_url(engine.url)}, {problem}; "
                f"{self!r} keeps its table on {redact_url(self._tm.engine.url)}"
            )

    async def create_schema(self) -> None:
        """Create the inbox table (and its index) unless it exists; check it otherwise."""
        async with self._tm.transaction() as session:
            await session.run_sync(lambda s: self._set_up(s.connection()))
        self._ready = True

    async def purge(self, *, older_than_ms: int | None = None) -> int:
        """Delete the rows older than the retention (or ``older_than_ms``); how many."""
        keep_ms = self._retain_ms if older_than_ms is None else older_than_ms
        cutoff = _now_ms() - keep_ms
        table = self.table
        async with self._tm.transaction() as session:
            if not self._ready:
                await session.run_sync(lambda s: self._set_up(s.connection()))
            result = await session.execute(delete(table).where(table.c.processed_at < cutoff))
        self._ready = True
        return int(getattr(result, "rowcount", 0) or 0)

    async def processed(self, ctx: InboxJob) -> bool:
        """Whether an execution of ``ctx``'s job committed (its row is there)."""
        table = self.table
        async with self._tm.transaction() as session:
            if not self._ready:
                await session.run_sync(lambda s: self._set_up(s.connection()))
            row = await session.execute(
                table.select().where(table.c.identity == inbox_identity(ctx))
            )
            return row.first() is not None

    async def close(self) -> None:
        """Dispose the engines the inbox made (from a URL; the sync one of ``once_sync``); a
        borrowed one stays open."""
        if self._owned_engine is not None:
            await self._owned_engine.dispose()
        if self._owned_sync_engine is not None:
            self._owned_sync_engine.dispose()

    # -- in the transaction ------------------------------------------------------------------

    async def _record(
        self, target: AsyncSession | AsyncConnection, ctx: InboxJob, after_commit: AfterCommit
    ) -> bool:
        if not self._ready:  # in the app's transaction: ready once that commits (DDL rolls back)
            if isinstance(target, AsyncSession):
                await target.run_sync(lambda s: self._set_up(s.connection()))
            else:
                await target.run_sync(self._set_up)
            after_commit(self._mark_ready)
        result = await target.execute(self._insert, self._values(ctx))
        return result.scalar() is not None

    @staticmethod
    def _values(ctx: InboxJob) -> dict[str, Any]:
        return {
            "identity": inbox_identity(ctx),
            "job_id": ctx.id,
            "job_type": ctx.type,
            "attempt": ctx.attempt,
            "processed_at": _now_ms(),
        }

    def _mark_ready(self) -> None:
        self._ready = True

    async def _complete(
        self,
        target: AsyncSession | AsyncConnection,
        settlement: AttemptSettlement | None,
        after_commit: AfterCommit,
    ) -> None:
        """Complete the job in this transaction when its store shares the database."""
        if settlement is None or settlement.completed:
            return
        store = settlement.store
        if not isinstance(store, CompletesInTransaction):
            return
        if isinstance(target, AsyncSession):
            bind: Any = target.sync_session.get_bind()
            connection = await target.connection()
        else:
            bind, connection = target.sync_engine, target
        if not store.completes_in(bind):
            return
        done = await store.complete_in(
            connection, settlement.job_id, settlement.lease_token, settlement.result
        )
        if done:
            after_commit(settlement.mark_completed)
        else:
            _log_lease_gone(settlement)

    def _record_sync(
        self, target: Session | Connection, ctx: InboxJob, after_commit: AfterCommit
    ) -> bool:
        if not self._ready:
            self._set_up(target.connection() if isinstance(target, Session) else target)
            after_commit(self._mark_ready)
        result = target.execute(self._insert, self._values(ctx))
        return result.scalar() is not None

    def _complete_sync(
        self,
        target: Session | Connection,
        settlement: AttemptSettlement | None,
        after_commit: AfterCommit,
    ) -> None:
        if settlement is None or settlement.completed:
            return
        store = settlement.store
        if not isinstance(store, CompletesInTransaction):
            return
        connection = target.connection() if isinstance(target, Session) else target
        if not store.completes_in(connection.engine):
            return
        if store.complete_in_sync(
            connection, settlement.job_id, settlement.lease_token, settlement.result
        ):
            after_commit(settlement.mark_completed)
        else:
            _log_lease_gone(settlement)

    def _prune_sync(self) -> None:
        table = self.table
        cutoff = _now_ms() - self._retain_ms
        try:
            with self._sync().begin() as connection:
                connection.execute(delete(table).where(table.c.processed_at < cutoff))
        except Exception:
            logger.opt(exception=True).warning("{}: pruning old rows failed", self)

    def _set_up(self, connection: Connection) -> None:
        table = self.table
        lock_for_creation_sync(connection, "inbox", table.fullname)
        columns = column_names(connection, table)
        if columns is None and self._create_tables:
            create_missing(connection, {table: None})
            return
        check_columns(table, columns, store="inbox", connection=connection)

    def _prune_due(self) -> bool:
        interval = self._prune_interval_s
        if interval is None:
            return False
        now = time.monotonic()
        if now < self._next_prune:
            return False
        self._next_prune = now + interval
        return True

    async def _prune_in_passing(self) -> None:
        try:
            await self.purge()
        except Exception:
            logger.opt(exception=True).warning("{}: pruning old rows failed", self)


def _call(callback: Callable[[], object]) -> None:
    callback()


def _session_after_commit(session: Session) -> AfterCommit:
    def after_commit(callback: Callable[[], object]) -> None:
        after_session_commit(session, callback, lambda: _call(callback))

    return after_commit


def _connection_after_commit(connection: Connection) -> AfterCommit:
    def after_commit(callback: Callable[[], object]) -> None:
        after_connection_commit(connection, callback, lambda: _call(callback))

    return after_commit


def _log_lease_gone(settlement: AttemptSettlement) -> None:
    logger.bind(job_id=settlement.job_id).info(
        "job {}: its lease token no longer holds it; the inbox's transaction commits without "
        "completing it (the runner's settle is refused, the new holder skips)",
        settlement.job_id,
    )


def _now_ms() -> int:
    return int(time.time() * 1000)
