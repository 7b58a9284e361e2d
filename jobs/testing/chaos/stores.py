"""Where a chaos run keeps its jobs (and its outbox): a URL and a fresh namespace.

A ``ChaosStore`` is plain data so it crosses into the worker processes as JSON. Jobs live in a
SQLite file, a PostgreSQL database (tables named by ``namespace``) or a Redis namespace; the
outbox variant needs a SQL ``outbox_url`` (it may be the job URL itself). ``drop`` removes what
the run wrote and nothing else.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Column, Integer, MetaData, Table

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from jobs import JobDriver, OutboxStore
    from orm_sqlalchemy import SQLAlchemyTransactionManager


def store_kind(url: str) -> str:
    """``sqlite``, ``postgres`` or ``redis``, from the URL's scheme."""
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    kinds = {"sqlite": "sqlite", "postgresql": "postgres", "postgres": "postgres"}
    kinds |= {"redis": "redis", "rediss": "redis"}
    if scheme not in kinds:
        raise ValueError(
            f"chaos: unknown store URL scheme {scheme!r}; use sqlite+aiosqlite://, "
            "postgresql://, or redis://"
        )
    return kinds[scheme]


def orders_table(metadata: MetaData, namespace: str) -> Table:
    """The outbox variant's own rows: one per committed order."""
    return Table(f"{namespace}orders", metadata, Column("id", Integer, primary_key=True))


@dataclass(frozen=True)
class ChaosStore:
    job_url: str
    namespace: str
    outbox_url: str | None = None

    @classmethod
    def fresh(cls, job_url: str, outbox_url: str | None = None) -> ChaosStore:
        store_kind(job_url)
        if outbox_url is not None and store_kind(outbox_url) == "redis":
            raise ValueError("chaos: the outbox needs a SQL store (sqlite or postgresql URL)")
        return cls(job_url, f"chaos{uuid.uuid4().hex[:8]}_", outbox_url)

    @property
    def kind(self) -> str:
        return store_kind(self.job_url)

    @property
    def label(self) -> str:
        if self.outbox_url is None or self.outbox_url == self.job_url:
            return self.kind
        return f"{store_kind(self.outbox_url)}+{self.kind}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ChaosStore:
        return cls(**json.loads(text))

    def open_driver(self, engine: AsyncEngine | None = None) -> JobDriver:
        """A driver on the job store; on a SQL store that is the outbox's, ``engine`` is shared."""
        if self.kind == "redis":
            from redis_jobs import RedisJobDriver

            return RedisJobDriver(url=self.job_url, namespace=self.namespace)
        from orm_sqlalchemy import SQLAlchemyJobStore

        if engine is not None and self.outbox_url == self.job_url:
            return SQLAlchemyJobStore(engine=engine, table_prefix=self.namespace)
        return SQLAlchemyJobStore(self.job_url, table_prefix=self.namespace)

    def open_engine(self) -> AsyncEngine:
        from orm_sqlalchemy import create_engine

        if self.outbox_url is None:
            raise ValueError("chaos: this store has no outbox_url")
        return create_engine(self.outbox_url)

    def open_outbox(self, tm: SQLAlchemyTransactionManager) -> OutboxStore:
        from orm_sqlalchemy import SQLAlchemyOutboxStore

        return SQLAlchemyOutboxStore(transaction_manager=tm, table_prefix=f"{self.namespace}ob_")

    async def create_orders_table(self, engine: AsyncEngine) -> Table:
        metadata = MetaData()
        table = orders_table(metadata, self.namespace)
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        return table

    async def drop(self) -> None:
        """Remove the run's keys or tables (SQLite files are left to the caller's directory)."""
        for url in {self.job_url, self.outbox_url} - {None}:
            assert url is not None
            await drop_store(url, self.namespace)


async def drop_store(url: str, namespace: str) -> None:
    """Remove what a store at ``url`` wrote under ``namespace``: a Redis namespace's keys, or
    every PostgreSQL table named with that prefix; a SQLite file is left to its directory."""
    kind = store_kind(url)
    if kind == "redis":
        from redis.asyncio import Redis

        from redis_jobs import delete_namespace

        client = Redis.from_url(url)
        try:
            await delete_namespace(client, namespace)
        finally:
            await client.aclose()
    elif kind == "postgres":
        await _drop_prefixed_tables(url, namespace)


async def _drop_prefixed_tables(url: str, prefix: str) -> None:
    from sqlalchemy import text

    from orm_sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            rows = await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE tablename LIKE :pattern"),
                {"pattern": prefix.replace("_", r"\_") + "%"},
            )
            for (name,) in rows.all():
                await conn.execute(text(f'DROP TABLE IF EXISTS "{name}" CASCADE'))
    finally:
        await engine.dispose()
