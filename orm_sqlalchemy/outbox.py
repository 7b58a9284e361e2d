"""The SQL outbox store: entries written in the caller's transaction, claimed with leases.

``append`` writes through the session open in the caller's context, so the entry commits or
rolls back with the business change; it never opens a transaction of its own. ``claim``,
``mark_published``, ``release`` and ``prune`` run in short transactions of their own, on
their own connections.

The claim picks entries by state (unpublished, lease free or expired), never by "id greater
than the last one seen": ids and creation times are handed out before commit, so commits
arrive out of order. PostgreSQL claims in one statement (a CTE with ``FOR UPDATE SKIP
LOCKED``, not ``IN (subquery LIMIT)``, which the planner may re-run past its LIMIT); SQLite in
one ``UPDATE ... RETURNING`` under ``BEGIN IMMEDIATE`` (one writer at a time).

On SQLite every transaction takes the write lock up front (``BEGIN IMMEDIATE``), so an app
transaction that has written holds off the relay's claims until it ends (they wait up to the
busy timeout); do not call ``claim``/``mark_published``/``release`` from inside an open
transaction on the same SQLite database, which would wait for itself.

Time is the database's clock (PostgreSQL ``clock_timestamp()``, SQLite ``julianday('now')``)
unless a ``Clock`` is given, whose reading is then passed as a parameter (tests).

Wake-up: a commit that appended through this store wakes ``wait_for_entries`` at once (an
after-commit callback); on PostgreSQL the append also issues ``pg_notify`` inside the caller's
transaction, which PostgreSQL delivers only on commit, to every store LISTENing on the
table's channel, in any process.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from loguru import logger
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    MetaData,
    String,
    cast,
    extract,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection

from jobs.clock import Clock, to_datetime
from jobs.outbox import OutboxEntry
from jobs.payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH, check_name, decode_payload, encode_payload

from .engine import is_sqlite
from .listen import PostgresListener
from .outbox_schema import outbox_schema
from .transactions import SQLAlchemyTransactionManager

__all__ = ["DEFAULT_MAX_PAYLOAD_BYTES", "SQLAlchemyOutboxStore"]

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
_LISTEN_RETRY_S = 5.0


class SQLAlchemyOutboxStore:
    """An ``OutboxStore`` on the engine of ``transaction_manager`` (SQLite or PostgreSQL)."""

    def __init__(
        self,
        transaction_manager: SQLAlchemyTransactionManager,
        *,
        table_prefix: str = "outbox_",
        clock: Clock | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        metadata: MetaData | None = None,
    ) -> None:
        self._tm = transaction_manager
        self._engine = transaction_manager.engine
        self._schema = outbox_schema(table_prefix, metadata)
        self._table = self._schema.entries
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        self._postgres = self._engine.dialect.name == "postgresql"
        self._sqlite = is_sqlite(self._engine)
        self._schema_ready = False
        self._instance = uuid.uuid4().hex
        self._session_flag = f"neverlost_outbox_appended:{self._instance}"
        self._signal = asyncio.Event()
        self._listener: PostgresListener | None = None
        self._listen_failed_at: float | None = None
        self._listen_lost = False
        self._closed = False
        subscribe: Callable[[Callable[[], None]], Callable[[], None]] | None = getattr(
            clock, "subscribe", None
        )
        # A manual clock that moves may make a released entry due: wake the waiters.
        self._unsubscribe = subscribe(self._signal.set) if subscribe is not None else None

    @property
    def metadata(self) -> MetaData:
        return self._schema.metadata

    @property
    def table_name(self) -> str:
        return self._table.name

    async def create_schema(self) -> None:
        """Create the outbox table and its indexes if they do not exist."""
        async with self._own_transaction(create_schema=True):
            pass

    async def append(
        self, type: str, payload: Any, *, key: str | None = None, delay_ms: int | None = None
    ) -> str:
        """Insert an entry through the caller's open transaction; its id.

        Raises PayloadError (naming the path) or JobTypeError before anything is written, and
        NoTransactionError when no transaction of this store's manager is open here.
        """
        check_name("outbox entry type", type, MAX_TYPE_LENGTH)
        if key is not None:
            check_name("key", key, MAX_KEY_LENGTH)
        if delay_ms is not None and (
            isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or delay_ms < 0
        ):
            raise ValueError(f"delay_ms must be a non-negative int, got {delay_ms!r}")
        text = encode_payload(payload, max_bytes=self._max_payload_bytes)
        session = self._tm.session
        conn = await session.connection()
        if not self._schema_ready:
            await self._ensure_schema(conn)
            self._tm.after_commit(self._mark_schema_ready)
        entry_id = str(uuid.uuid4())
        now = self._now()
        await conn.execute(
            self._table.insert().values(
                id=entry_id,
                type=type,
                payload=text,
                key=key,
                delay_ms=delay_ms,
                created_at=now,
                available_at=now,
                attempts=0,
            )
        )
        if not session.info.get(self._session_flag):
            session.info[self._session_flag] = True
            self._tm.after_commit(self._on_commit)
            if self._postgres:
                await conn.execute(
                    select(func.pg_notify(self._schema.notify_channel, self._instance))
                )
        return entry_id

    async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
        """Lease up to ``limit`` claimable entries for ``lease_ms``, oldest first."""
        if limit <= 0:
            return []
        if lease_ms <= 0:
            raise ValueError(f"lease_ms must be positive, got {lease_ms}")
        t = self._table
        now = self._now()
        values = {
            "attempts": t.c.attempts + 1,
            "lease_token": cast(t.c.attempts + 1, String) + literal(f":{secrets.token_hex(12)}"),
            "available_at": now + lease_ms,
        }
        due = (
            select(t.c.id)
            .where(t.c.published_at.is_(None), t.c.available_at <= now)
            .order_by(t.c.available_at, t.c.id)
            .limit(limit)
        )
        if self._postgres:
            picked = due.with_for_update(skip_locked=True).cte("picked")
            stmt = update(t).where(t.c.id == picked.c.id).values(values)
        else:
            stmt = update(t).where(t.c.id.in_(due)).values(values)
        returning = stmt.returning(
            t.c.id, t.c.type, t.c.payload, t.c.key, t.c.delay_ms, t.c.created_at,
            t.c.attempts, t.c.lease_token,
        )  # fmt: skip
        if self._postgres and not self._closed:
            # Listen before claiming, so no commit after this claim goes unheard.
            await self._ensure_listening(wake_on_reconnect=False)
        async with self._own_transaction() as conn:
            rows = (await conn.execute(returning)).all()
        entries = [
            OutboxEntry(
                id=row.id,
                type=row.type,
                payload=decode_payload(row.payload),
                key=row.key,
                delay_ms=row.delay_ms,
                created_at=to_datetime(row.created_at),
                attempts=row.attempts,
                lease_token=row.lease_token,
            )
            for row in rows
        ]
        entries.sort(key=lambda entry: (entry.created_at, entry.id))
        return entries

    async def mark_published(self, entry_id: str, lease_token: str) -> bool:
        """Mark a leased entry published; False, writing nothing, if ``lease_token`` is stale."""
        return await self._fenced(entry_id, lease_token, {"published_at": self._now()})

    async def release(self, entry_id: str, lease_token: str, *, delay_ms: int, error: str) -> bool:
        """Make a leased entry claimable again after ``delay_ms``; False if the token is stale."""
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be non-negative, got {delay_ms}")
        values = {
            "available_at": self._now() + delay_ms,
            "lease_token": None,
            # PostgreSQL text cannot hold NUL; an error message might.
            "last_error": error.replace("\x00", "\\u0000"),
        }
        return await self._fenced(entry_id, lease_token, values)

    async def prune(self, older_than_ms: int) -> int:
        """Delete entries published more than ``older_than_ms`` ago; how many were deleted."""
        t = self._table
        stmt = t.delete().where(
            t.c.published_at.is_not(None), t.c.published_at < self._now() - older_than_ms
        )
        async with self._own_transaction() as conn:
            result = await conn.execute(stmt)
        return _rowcount(result)

    async def wait_for_entries(self, timeout_ms: int) -> None:
        """Return after a commit that appended (here, or on PostgreSQL anywhere), or timeout.

        Returns at once if such a commit happened since the last call; an idle store waits the
        whole ``timeout_ms``.
        """
        if self._postgres and not self._closed:
            await self._ensure_listening(wake_on_reconnect=True)
        if not self._signal.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(timeout_ms, 0) / 1000):
                    await self._signal.wait()
        self._signal.clear()

    async def close(self) -> None:
        """Stop listening, unsubscribe from the clock (the engine is the manager's); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()

    def _on_commit(self) -> None:
        self._signal.set()

    def _now(self) -> ColumnElement[int]:
        if self._clock is not None:
            return literal(self._clock.now_ms(), BigInteger)
        if self._sqlite:
            return cast((func.julianday("now") - 2440587.5) * 86_400_000.0, BigInteger)
        return cast(func.floor(extract("epoch", func.clock_timestamp()) * 1000), BigInteger)

    async def _fenced(self, entry_id: str, lease_token: str, values: dict[str, Any]) -> bool:
        t = self._table
        stmt = (
            update(t)
            .where(t.c.id == entry_id, t.c.lease_token == lease_token, t.c.published_at.is_(None))
            .values(values)
        )
        async with self._own_transaction() as conn:
            result = await conn.execute(stmt)
        return _rowcount(result) == 1

    @contextlib.asynccontextmanager
    async def _own_transaction(
        self, *, create_schema: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        """A short transaction on a connection of its own, never the caller's."""
        async with self._engine.connect() as conn:
            if self._postgres:
                # SKIP LOCKED claims are right under READ COMMITTED whatever the app's default.
                conn = await conn.execution_options(isolation_level="READ COMMITTED")
            async with conn.begin():
                ready = self._schema_ready and not create_schema
                if not ready:
                    await self._ensure_schema(conn)
                yield conn
        if not ready:
            self._mark_schema_ready()

    async def _ensure_schema(self, conn: AsyncConnection) -> None:
        """Create the table if missing, in ``conn``'s transaction.

        The caller records it ready only after that transaction commits: a rollback takes
        the new table with it.
        """
        if self._postgres:
            # Two first users at once would both see no table and collide creating it.
            await conn.execute(select(func.pg_advisory_xact_lock(_lock_key(self._table.name))))
        await conn.run_sync(self._schema.metadata.create_all, tables=[self._table])

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
        if self._listener is None:
            self._listener = PostgresListener(
                self._engine, self._schema.notify_channel, self._notified, ignore=_no_one
            )
        try:
            reconnected = await self._listener.ensure()
        except Exception as exc:
            self._listen_failed_at, self._listen_lost = now, True
            logger.warning("outbox LISTEN unavailable, relying on polling: {error!r}", error=exc)
            return
        if reconnected and self._listen_lost and wake_on_reconnect:
            self._signal.set()
        self._listen_failed_at, self._listen_lost = None, False

    def _notified(self, payload: str | None) -> None:
        if payload is None:  # the connection was lost
            self._listen_lost = True
            self._signal.set()
        elif payload != self._instance:  # our own appends already woke us at commit
            self._signal.set()


def _no_one(pid: int) -> bool:
    return False


def _rowcount(result: CursorResult[Any]) -> int:
    return max(result.rowcount, 0)


def _lock_key(table_name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a table."""
    digest = uuid.uuid5(uuid.NAMESPACE_URL, f"neverlost-outbox:{table_name}").int
    return (digest >> 64) - (1 << 63)
