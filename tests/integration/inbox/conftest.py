"""The inbox's database (the effects' database): a SQLite file or the PostgreSQL test database.

Each test uses its own table prefix (the inbox table, an ``effects`` table) and drops its
tables after. PostgreSQL tests fail, not skip, when the server is absent.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Connection, Integer, MetaData, String, Table, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from jobs import AbortSignal, JobContext
from jobs.spi import AttemptSettlement
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import SQLAlchemyInbox, SQLAlchemyTransactionManager, create_engine
from tests.stores import POSTGRES_URL

EFFECTS_KINDS = [
    pytest.param("sqlite", id="effects-sqlite"),
    pytest.param("postgres", id="effects-postgres", marks=pytest.mark.postgres),
]


class EffectsDb:
    """An engine, its transaction manager, an inbox and an ``effects`` table (one row per
    effect a handler committed: the job id it was written for)."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.url = (
            POSTGRES_URL if kind == "postgres" else f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
        )
        self.prefix = f"i{uuid.uuid4().hex[:10]}_"
        self.metadata = MetaData()
        self.effects = Table(
            f"{self.prefix}effects",
            self.metadata,
            Column("n", Integer, primary_key=True, autoincrement=True),
            Column("job", String(100), nullable=False),
        )
        self.engine: AsyncEngine = create_engine(self.url)
        self.tm = SQLAlchemyTransactionManager(self.engine)
        self.inbox = SQLAlchemyInbox(self.tm, table_prefix=self.prefix, metadata=self.metadata)

    async def setup(self) -> None:
        await self.inbox.create_schema()
        async with self.engine.begin() as conn:
            await conn.run_sync(self.metadata.create_all)

    async def write_effect(self, job: str) -> None:
        """One effect row, in the transaction open in this context (the inbox's)."""
        await self.tm.session.execute(self.effects.insert().values(job=job))

    async def effect_count(self, job: str | None = None) -> int:
        query = select(func.count()).select_from(self.effects)
        if job is not None:
            query = query.where(self.effects.c.job == job)
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="DEFERRED")
            return int((await conn.execute(query)).scalar_one())

    def write_effect_sync(self, session: Session | Connection, job: str) -> None:
        """One effect row through a sync ``session`` (a ``once_sync`` block's)."""
        session.execute(self.effects.insert().values(job=job))

    async def close(self) -> None:
        await self.inbox.close()
        await self.engine.dispose()
        if self.kind == "postgres":
            await drop_store(self.url, self.prefix)


def context_of(
    job_id: str,
    *,
    key: str | None = None,
    attempt: int = 1,
    settlement: AttemptSettlement | None = None,
    job_type: str = "effects.write",
) -> JobContext:
    token = settlement.lease_token if settlement is not None else None
    return JobContext(job_id, job_type, attempt, 3, AbortSignal(), key, None, 0, token, settlement)


@pytest.fixture(params=EFFECTS_KINDS)
async def effects_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EffectsDb]:
    db = EffectsDb(request.param, tmp_path)
    await db.setup()
    try:
        yield db
    finally:
        await db.close()
