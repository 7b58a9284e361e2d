"""``SQLAlchemyInbox.once`` on SQLite and PostgreSQL: the record and the effects commit together
or not at all, the identity is the job (its key when it has one), and concurrent executions of
one job serialise on the record: exactly one commits its effects."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from orm_sqlalchemy import SQLAlchemyInbox
from orm_sqlalchemy.inbox import inbox_identity

from .conftest import EffectsDb, context_of

DEADLINE_S = 20.0


class Boom(Exception):
    pass


async def test_first_execution_commits_record_and_effect(effects_db: EffectsDb) -> None:
    ctx = context_of("job-1")
    async with effects_db.inbox.once(ctx) as first:
        assert first
        await effects_db.write_effect(ctx.id)
    assert await effects_db.effect_count() == 1
    assert await effects_db.inbox.processed(ctx)

    async with effects_db.inbox.once(context_of("job-1", attempt=2)) as again:
        assert not again  # a re-run: the earlier execution committed
    assert await effects_db.effect_count() == 1


async def test_an_exception_rolls_back_record_and_effect(effects_db: EffectsDb) -> None:
    ctx = context_of("job-2")

    async def failing() -> None:
        async with effects_db.inbox.once(ctx) as first:
            assert first
            await effects_db.write_effect(ctx.id)
            raise Boom

    with pytest.raises(Boom):
        await failing()
    assert await effects_db.effect_count() == 0
    assert not await effects_db.inbox.processed(ctx)

    async with effects_db.inbox.once(context_of("job-2", attempt=2)) as retried:
        assert retried  # the failed attempt left nothing: the retry runs the effects
        await effects_db.write_effect(ctx.id)
    assert await effects_db.effect_count() == 1


async def test_once_joins_the_apps_open_transaction(effects_db: EffectsDb) -> None:
    ctx = context_of("job-3")

    async def failing() -> None:
        async with effects_db.tm.transaction():
            await effects_db.write_effect("before")
            async with effects_db.inbox.once(ctx) as first:
                assert first
                await effects_db.write_effect(ctx.id)
            raise Boom  # after once(): the outer transaction, record included, rolls back

    with pytest.raises(Boom):
        await failing()
    assert await effects_db.effect_count() == 0
    assert not await effects_db.inbox.processed(ctx)


async def test_the_identity_is_the_key_when_there_is_one(effects_db: EffectsDb) -> None:
    async with effects_db.inbox.once(context_of("job-a", key="order-7")) as first:
        assert first
    # Another job with the same key (an outbox entry published twice): the same logical job.
    async with effects_db.inbox.once(context_of("job-b", key="order-7")) as first:
        assert not first
    async with effects_db.inbox.once(context_of("job-a")) as first:
        assert first  # no key: its id, a different identity
    assert inbox_identity(context_of("x", key="k")) == "key:k"
    assert inbox_identity(context_of("x")) == "id:x"


async def test_concurrent_duplicates_commit_one_effect(effects_db: EffectsDb) -> None:
    """Eight executions of one job at once (a stale worker and the new holder, many times
    over): one commits its effect, the others find its record. On PostgreSQL each opens its
    transaction first, so the INSERTs truly race; on SQLite transactions are one at a time
    (the writer gate), and the executions queue for it."""
    runs = 8
    barrier = asyncio.Barrier(runs)
    firsts: list[bool] = []
    postgres = effects_db.kind == "postgres"

    async def execution(n: int) -> None:
        ctx = context_of("job-dup", attempt=1 + n % 2)
        if postgres:
            async with effects_db.tm.transaction() as session:
                await session.execute(text("SELECT 1"))
                await barrier.wait()
                async with effects_db.inbox.once(ctx) as first:
                    firsts.append(first)
                    if first:
                        await effects_db.write_effect(ctx.id)
        else:
            await barrier.wait()
            async with effects_db.inbox.once(ctx) as first:
                firsts.append(first)
                if first:
                    await effects_db.write_effect(ctx.id)

    async with asyncio.timeout(DEADLINE_S):
        await asyncio.gather(*(execution(n) for n in range(runs)))
    assert sorted(firsts) == [False] * (runs - 1) + [True]
    assert await effects_db.effect_count() == 1


async def test_a_waiting_duplicate_runs_when_the_first_rolls_back(effects_db: EffectsDb) -> None:
    """The first execution holds the record uncommitted; a duplicate waits on it; the first
    fails (rolled back), so the duplicate's insert goes through and it commits the effect."""
    inside = asyncio.Event()
    release = asyncio.Event()
    ctx = context_of("job-rb")

    async def failing() -> None:
        async with effects_db.inbox.once(ctx) as first:
            assert first
            await effects_db.write_effect("failing")
            inside.set()
            await release.wait()
            raise Boom

    async def duplicate() -> bool:
        await inside.wait()
        release.set()  # the first goes on to fail; this one waits for its transaction
        async with effects_db.inbox.once(context_of("job-rb", attempt=2)) as first:
            if first:
                await effects_db.write_effect("duplicate")
            return first

    async with asyncio.timeout(DEADLINE_S):
        failed, first = await asyncio.gather(failing(), duplicate(), return_exceptions=True)
    assert isinstance(failed, Boom)
    assert first is True
    assert await effects_db.effect_count("failing") == 0
    assert await effects_db.effect_count("duplicate") == 1


async def test_purge_drops_rows_past_the_retention(effects_db: EffectsDb) -> None:
    async with effects_db.inbox.once(context_of("old")):
        pass
    assert await effects_db.inbox.purge() == 0  # within the retention
    assert await effects_db.inbox.purge(older_than_ms=-1) == 1
    assert not await effects_db.inbox.processed(context_of("old"))


async def test_a_table_is_made_on_first_use(effects_db: EffectsDb) -> None:
    inbox = SQLAlchemyInbox(effects_db.tm, table_prefix=f"{effects_db.prefix}x_")
    async with inbox.once(context_of("fresh")) as first:
        assert first
    assert await inbox.processed(context_of("fresh"))


def test_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="SQLAlchemyInbox takes"):
        SQLAlchemyInbox(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retain_ms"):
        SQLAlchemyInbox("sqlite+aiosqlite://", retain_ms=0)


async def test_a_table_made_by_a_rolled_back_execution_is_made_again(
    effects_db: EffectsDb,
) -> None:
    """The first use creates the table in the app's transaction; when that rolls back (the
    handler failed), so does the CREATE on SQLite and PostgreSQL: the next use makes it again."""
    inbox = SQLAlchemyInbox(effects_db.tm, table_prefix=f"{effects_db.prefix}y_")

    async def failing() -> None:
        async with inbox.once(context_of("made")):
            raise Boom

    with pytest.raises(Boom):
        await failing()
    async with inbox.once(context_of("made", attempt=2)) as first:
        assert first
    assert await inbox.processed(context_of("made"))
