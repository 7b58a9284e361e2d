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

from sqlalchemy import Column, Integer, MetaData, Table
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.drivers import factory_for, scheme_of
from jobs.spi import JobDriver, SQLOutboxSite

_KINDS = {"postgresql": "postgres", "rediss": "redis", "unix": "redis"}


def store_kind(url: str) -> str:
    """A short label of the store (``sqlite``, ``postgres``, ``redis``...) from the URL's
    scheme, which a driver must be registered for (``jobs.drivers``)."""
    factory_for(url)  # UnknownSchemeError naming the known schemes
    family = scheme_of(url).split("+", 1)[0]
    return _KINDS.get(family, family)


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
        if outbox_url is not None and factory_for(outbox_url).open_outbox is None:
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

    def open_driver(self, outbox: SQLOutboxSite | None = None) -> JobDriver:
        """A driver on the job store; on the database of ``outbox`` it shares its engine."""
        if outbox is not None and self.outbox_url == self.job_url:
            return outbox.open_driver(prefix=self.namespace)
        return factory_for(self.job_url)(self.job_url, prefix=self.namespace)

    def open_outbox(self) -> SQLOutboxSite:
        """The outbox (its engine, transactions and store) on ``outbox_url``."""
        if self.outbox_url is None:
            raise ValueError("chaos: this store has no outbox_url")
        open_outbox = factory_for(self.outbox_url).open_outbox
        if open_outbox is None:
            raise ValueError(f"chaos: {self.outbox_url.partition(':')[0]} keeps no outbox")
        return open_outbox(self.outbox_url, prefix=self.namespace)

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
    """Remove what a store at ``url`` wrote under ``namespace`` (the factory's ``drop``: a
    Redis namespace's keys, every PostgreSQL table named with that prefix; a SQLite file is
    left to its directory)."""
    drop = factory_for(url).drop
    if drop is not None:
        await drop(url, namespace)
