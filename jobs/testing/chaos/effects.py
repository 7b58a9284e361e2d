"""The "effects" variant of the SIGKILL soak: handlers that commit an effect row per execution.

Each ``chaos.effect`` job's handler writes one row (the job's id) to an ``effects`` table on a
SQL database, through an inbox (``inbox=True``: ``once(ctx)`` around the write) or in a plain
transaction (the control). A worker killed after that commit but before the job settled runs
the job again elsewhere: without the inbox the row is written twice; with it, the re-run finds
the record and writes nothing, and where the jobs share the effects' database the job was
completed in the write's own transaction. The handler sleeps after the commit (the window a
kill lands in). ``effect_counts`` reads the table for the checker: effects duplicated per job.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from dataclasses import asdict, dataclass

from sqlalchemy import Column, Integer, MetaData, String, Table, select

from jobs.context import JobContext
from jobs.drivers import factory_for
from jobs.spi import JobInbox, SQLOutboxSite

__all__ = ["EFFECT", "EffectWriter", "EffectsTarget"]

EFFECT = "chaos.effect"


@dataclass(frozen=True)
class EffectsTarget:
    """Where a run's effects go: a SQL ``url``, a table ``prefix``, through an inbox or not."""

    url: str
    prefix: str
    inbox: bool

    @classmethod
    def fresh(cls, url: str, *, inbox: bool) -> EffectsTarget:
        if factory_for(url).open_outbox is None:
            raise ValueError("chaos: effects go to a SQL database (a sqlite or postgresql URL)")
        return cls(url, f"fx{uuid.uuid4().hex[:8]}_", inbox)

    @property
    def label(self) -> str:
        return "inbox" if self.inbox else "no inbox"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> EffectsTarget:
        return cls(**json.loads(text))

    def table(self, metadata: MetaData) -> Table:
        return Table(
            f"{self.prefix}effects",
            metadata,
            Column("n", Integer, primary_key=True, autoincrement=True),
            Column("job", String(64), nullable=False),
        )

    def open_site(self) -> SQLOutboxSite:
        open_outbox = factory_for(self.url).open_outbox
        assert open_outbox is not None
        return open_outbox(self.url, prefix=self.prefix)

    async def create_table(self) -> None:
        site = self.open_site()
        try:
            metadata = MetaData()
            self.table(metadata)
            async with site.engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
        finally:
            await site.close()

    async def effect_counts(self) -> Counter[str]:
        """How many effect rows each job committed."""
        site = self.open_site()
        try:
            table = self.table(MetaData())
            async with site.transaction() as session:
                rows = (await session.execute(select(table.c.job))).scalars().all()
            return Counter(rows)
        finally:
            await site.close()

    async def drop(self) -> None:
        drop = factory_for(self.url).drop
        if drop is not None:
            await drop(self.url, self.prefix)


class EffectWriter:
    """A worker's side: the handler body that commits one effect row (through the inbox)."""

    def __init__(self, target: EffectsTarget, site: SQLOutboxSite) -> None:
        self.target = target
        self.site = site
        self.table = target.table(MetaData())
        self.inbox: JobInbox | None = (
            site.open_inbox(prefix=target.prefix) if target.inbox else None
        )

    async def write(self, ctx: JobContext, after_commit_s: float) -> None:
        if self.inbox is not None:
            async with self.inbox.once(ctx) as first:
                if first:
                    await self._insert(ctx)
        else:
            await self._insert(ctx)
        await asyncio.sleep(after_commit_s)  # the window a kill lands in: committed, unsettled

    async def _insert(self, ctx: JobContext) -> None:
        async with self.site.transaction() as session:  # joins the inbox's
            await session.execute(self.table.insert().values(job=ctx.id))
