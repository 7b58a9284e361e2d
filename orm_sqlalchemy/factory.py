"""The SQL stores' entry in the ``neverlost.drivers`` entry points (``jobs.spi.factories``):
a job store, an outbox on the same database, and the removal of a prefix's tables, from a URL.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from jobs.spi import DriverFactory, JobDriver, OutboxStore

from .engine import create_engine
from .inbox import SQLAlchemyInbox
from .outbox import SQLAlchemyOutboxStore
from .store import SQLAlchemyJobStore
from .transactions import SQLAlchemyTransactionManager

__all__ = ["FACTORY", "SQLOutbox", "drop_prefixed_tables"]


def _table_prefix(options: dict[str, Any]) -> dict[str, Any]:
    """``prefix`` (the common option) or ``table_prefix`` (this store's name for it)."""
    if options.pop("namespace", None) is not None:
        raise ValueError("namespace is for redis:// URLs; a SQL store takes table_prefix")
    prefix = options.pop("prefix", None)
    if prefix is not None:
        options.setdefault("table_prefix", prefix)
    if options.get("table_prefix") is None:
        options.pop("table_prefix", None)
    return options


def open_store(url: str, **options: Any) -> JobDriver:
    """``SQLAlchemyJobStore(url, ...)``; ``create=False`` makes no file and no table."""
    options = _table_prefix(options)
    create = options.pop("create", True)
    return SQLAlchemyJobStore(url, create_tables=create, **options)


class SQLOutbox:
    """An outbox on the database at a URL (``jobs.spi.factories.SQLOutboxSite``)."""

    def __init__(self, url: str, *, prefix: str = "") -> None:
        self._engine = create_engine(url)
        self.transaction_manager = SQLAlchemyTransactionManager(self._engine)
        self._outbox = SQLAlchemyOutboxStore(
            transaction_manager=self.transaction_manager, table_prefix=f"{prefix}ob_"
        )

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def outbox(self) -> OutboxStore:
        return self._outbox

    def transaction(self) -> AbstractAsyncContextManager[AsyncSession]:
        return self.transaction_manager.transaction()

    def open_driver(self, **options: Any) -> JobDriver:
        """A job store on this outbox's engine (borrowed: closing the store leaves it open)."""
        options = _table_prefix(options)
        options.pop("create", None)
        return SQLAlchemyJobStore(engine=self._engine, **options)

    def open_inbox(self, **options: Any) -> SQLAlchemyInbox:
        """A ``SQLAlchemyInbox`` in this site's transactions (``prefix``: its table's)."""
        options = _table_prefix(options)
        return SQLAlchemyInbox(self.transaction_manager, **options)

    async def close(self) -> None:
        await self._engine.dispose()


async def drop(url: str, prefix: str) -> None:
    """Drop every PostgreSQL table named with ``prefix``; a SQLite file is left to its
    directory (the caller's)."""
    if url.partition(":")[0].split("+")[0] == "sqlite":
        return
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await drop_prefixed_tables(conn, prefix)
    finally:
        await engine.dispose()


async def drop_prefixed_tables(conn: AsyncConnection, prefix: str) -> None:
    """Drop every PostgreSQL table whose name starts with ``prefix`` (the job, workers, audit,
    counters and edges tables of a store, an outbox's entries and relays: whatever a version
    adds), in ``conn``'s transaction."""
    rows = await conn.execute(
        text("SELECT tablename FROM pg_tables WHERE tablename LIKE :pattern"),
        {"pattern": prefix.replace("_", r"\_") + "%"},
    )
    for (name,) in rows.all():
        await conn.execute(text(f'DROP TABLE IF EXISTS "{name}" CASCADE'))


FACTORY = DriverFactory(open_driver=open_store, drop=drop, open_outbox=SQLOutbox, extra=None)
"""Registered for sqlite, sqlite+aiosqlite, postgres(ql)[+asyncpg]; PostgreSQL needs the
postgres extra (the engine says so, naming it)."""
