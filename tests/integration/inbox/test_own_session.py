"""``once(ctx, session=...)``: the inbox in a transaction the app opened itself, on an
``AsyncSession`` or an ``AsyncConnection`` (the app commits or rolls back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from jobs import JobQueue
from jobs.spi import AttemptSettlement
from orm_sqlalchemy import SQLAlchemyJobStore, create_engine

from .conftest import EffectsDb, context_of


class Boom(Exception):
    pass


async def test_on_the_apps_session_record_and_effect_commit_together(
    effects_db: EffectsDb,
) -> None:
    ctx = context_of("own-1")
    async with (
        AsyncSession(effects_db.engine) as session,
        session.begin(),
        effects_db.inbox.once(ctx, session=session) as first,
    ):
        assert first
        await session.execute(effects_db.effects.insert().values(job=ctx.id))
    assert await effects_db.inbox.processed(ctx)
    assert await effects_db.effect_count(ctx.id) == 1
    async with (
        AsyncSession(effects_db.engine) as session,
        session.begin(),
        effects_db.inbox.once(ctx, session=session) as first,
    ):
        assert not first


async def test_the_apps_rollback_takes_the_record_with_it(effects_db: EffectsDb) -> None:
    ctx = context_of("own-2")

    async def failing() -> None:
        async with effects_db.engine.connect() as conn, conn.begin():
            async with effects_db.inbox.once(ctx, session=conn) as first:
                assert first
                await conn.execute(effects_db.effects.insert().values(job=ctx.id))
            raise Boom

    with pytest.raises(Boom):
        await failing()
    assert not await effects_db.inbox.processed(ctx)
    assert await effects_db.effect_count(ctx.id) == 0
    async with (
        effects_db.engine.connect() as conn,
        conn.begin(),
        effects_db.inbox.once(ctx, session=conn) as first,
    ):
        assert first


async def test_the_job_completes_when_the_apps_transaction_commits(
    effects_db: EffectsDb,
) -> None:
    store = SQLAlchemyJobStore(effects_db.url, table_prefix=effects_db.prefix)
    try:
        job_id = await JobQueue(store).enqueue("effects.write", {})
        assert job_id is not None
        [claimed] = await store.claim(1, 30_000, ["effects.write"])
        settlement = AttemptSettlement(store, claimed.id, claimed.lease_token)
        ctx = context_of(claimed.id, settlement=settlement)
        async with AsyncSession(effects_db.engine) as session, session.begin():
            async with effects_db.inbox.once(ctx, session=session) as first:
                assert first
            assert not settlement.completed  # not before the commit
        assert settlement.completed
        info = await store.get_job(job_id)
        assert info is not None
        assert info.state == "completed"
    finally:
        await store.close()


async def test_a_session_on_another_database_is_refused(
    effects_db: EffectsDb, tmp_path: Path
) -> None:
    other = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
    try:
        async with AsyncSession(other) as session:
            with pytest.raises(ValueError, match="keeps its table on"):
                async with effects_db.inbox.once(context_of("x"), session=session):
                    pass
    finally:
        await other.dispose()
