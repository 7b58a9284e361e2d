"""One harness per database: every outbox test runs on SQLite (a file) and PostgreSQL.

PostgreSQL tests need the server on 127.0.0.1:5432 (database ``test``, user ``postgres``) and
fail when it is absent. Each test uses its own table prefix and drops its tables after.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.clock import Clock
from orm_sqlalchemy.engine import create_engine
from orm_sqlalchemy.factory import drop_prefixed_tables
from orm_sqlalchemy.outbox import SQLAlchemyOutboxStore
from orm_sqlalchemy.transactions import SQLAlchemyTransactionManager
from tests.stores import POSTGRES_URL


class OutboxHarness:
    """Engines, managers and stores for one test, on one database, cleaned up after."""

    def __init__(self, backend: str, tmp_path: Path, *, url: str | None = None) -> None:
        """``backend``: "sqlite", "postgres", or "pgbouncer" (PostgreSQL at ``url``)."""
        self.backend = backend
        self.url = url or (
            POSTGRES_URL if backend == "postgres" else f"sqlite:///{tmp_path / 'app.db'}"
        )
        self.prefix = f"t{uuid.uuid4().hex[:10]}_"
        self.metadata = MetaData()
        self.orders = Table(
            f"{self.prefix}orders",
            self.metadata,
            Column("id", Integer, primary_key=True),
            Column("note", String(100), nullable=False),
        )
        self._engines: list[AsyncEngine] = []
        self._stores: list[SQLAlchemyOutboxStore] = []

    @property
    def postgres(self) -> bool:
        return self.backend in ("postgres", "pgbouncer")

    def engine(self, **kwargs: Any) -> AsyncEngine:
        engine = create_engine(self.url, **kwargs)
        self._engines.append(engine)
        return engine

    def store(
        self, tm: SQLAlchemyTransactionManager | None = None, *, clock: Clock | None = None
    ) -> SQLAlchemyOutboxStore:
        tm = tm if tm is not None else SQLAlchemyTransactionManager(self.engine())
        store = SQLAlchemyOutboxStore(
            transaction_manager=tm, table_prefix=self.prefix, clock=clock, metadata=self.metadata
        )
        self._stores.append(store)
        return store

    async def setup(self, store: SQLAlchemyOutboxStore) -> None:
        """Create the outbox table and the app's orders table."""
        await store.create_schema()
        async with self._engines[0].begin() as conn:
            await conn.run_sync(self.metadata.create_all)

    async def count(self, table: str = "entries", where: str = "") -> int:
        # A deferred (read) transaction on SQLite: the test may hold the write lock meanwhile.
        async with self._engines[0].connect() as conn:
            conn = await conn.execution_options(sqlite_begin="DEFERRED")
            sql = f"SELECT count(*) FROM {self.prefix}{table} {where}"
            return int((await conn.execute(text(sql))).scalar_one())

    async def order_count(self) -> int:
        async with self._engines[0].connect() as conn:
            conn = await conn.execution_options(sqlite_begin="DEFERRED")
            query = select(func.count()).select_from(self.orders)
            return int((await conn.execute(query)).scalar_one())

    async def cleanup(self) -> None:
        for store in self._stores:
            await store.close()
        if self._engines and self.postgres:
            async with self._engines[0].begin() as conn:
                await drop_prefixed_tables(conn, self.prefix)  # the job tables a test made too
        for engine in self._engines:
            await engine.dispose()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]),
    ]
)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OutboxHarness]:
    url = request.getfixturevalue("pgbouncer").url if request.param == "pgbouncer" else None
    h = OutboxHarness(request.param, tmp_path, url=url)
    yield h
    await h.cleanup()


@pytest.fixture
async def postgres_harness(tmp_path: Path) -> AsyncIterator[OutboxHarness]:
    """For what only PostgreSQL can show (interleaved writers, NOTIFY across engines)."""
    h = OutboxHarness("postgres", tmp_path)
    yield h
    await h.cleanup()
