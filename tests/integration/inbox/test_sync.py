"""The inbox from sync code: ``once_sync`` (a ``def`` handler's thread) through the inbox's own
sync session or the app's, and ``@job_handler(..., inbox=...)`` on ``def`` handlers, with jobs
on every driver and effects on SQLite or PostgreSQL (psycopg 3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from jobs import JobContext, JobHandlerRegistry, JobQueue, job_handler
from jobs.spi import AttemptSettlement, InboxJob
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import create_sync_engine
from tests.support import captured_logs

from .conftest import EffectsDb, context_of
from .test_handlers import JOB, JOB_KINDS, Boom, Jobs, job_warnings, open_jobs, run_until_finished


@pytest.fixture(params=JOB_KINDS)
async def jobs(
    request: pytest.FixtureRequest, effects_db: EffectsDb, tmp_path: Path
) -> AsyncIterator[Jobs]:
    opened = open_jobs(request.param, effects_db, tmp_path, None)
    try:
        yield opened
    finally:
        await opened.driver.close()
        if opened.url is not None and opened.kind in ("postgres", "redis"):
            await drop_store(opened.url, opened.namespace)


def registry_of(function: Callable[..., Any]) -> JobHandlerRegistry:
    registry = JobHandlerRegistry()
    registry.add(function)
    return registry


async def test_once_sync_commits_the_record_with_the_effect_and_skips_a_rerun(
    effects_db: EffectsDb,
) -> None:
    inbox = effects_db.inbox

    def execution(ctx: JobContext) -> bool:
        with inbox.once_sync(ctx) as first:
            if first:
                effects_db.write_effect_sync(inbox.sync_session, ctx.id)
            return first

    ctx = context_of("job-1")
    assert await asyncio.to_thread(execution, ctx) is True
    assert await asyncio.to_thread(execution, ctx) is False
    assert await effects_db.effect_count("job-1") == 1
    assert await inbox.processed(ctx)


async def test_once_sync_rolls_back_record_and_effect_on_an_exception(
    effects_db: EffectsDb,
) -> None:
    inbox = effects_db.inbox

    def failing(ctx: JobContext) -> None:
        with inbox.once_sync(ctx):
            effects_db.write_effect_sync(inbox.sync_session, ctx.id)
            raise Boom("after the write")

    ctx = context_of("job-2")
    with pytest.raises(Boom):
        await asyncio.to_thread(failing, ctx)
    assert await effects_db.effect_count("job-2") == 0
    assert not await inbox.processed(ctx)
    with pytest.raises(RuntimeError, match="outside a once_sync"):
        _ = inbox.sync_session


async def test_once_sync_joins_the_apps_sync_session(effects_db: EffectsDb) -> None:
    """The app's own sync Session: the record and the effect commit or roll back with it."""
    engine = create_sync_engine(effects_db.url)
    inbox = effects_db.inbox

    def app(ctx: JobContext, *, commit: bool) -> bool:
        with Session(engine) as session:
            with inbox.once_sync(ctx, session=session) as first:
                effects_db.write_effect_sync(session, ctx.id)
            if commit:
                session.commit()
            else:
                session.rollback()
        return first

    try:
        rolled_back, committed = context_of("job-3"), context_of("job-4")
        assert await asyncio.to_thread(app, rolled_back, commit=False) is True
        assert not await inbox.processed(rolled_back)
        assert await asyncio.to_thread(app, committed, commit=True) is True
        assert await inbox.processed(committed)
        assert await effects_db.effect_count() == 1
        refused = inbox.once_sync(committed, session=object())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="takes a Session or a Connection"):
            refused.__enter__()
    finally:
        engine.dispose()


async def test_a_def_handler_with_an_inbox_commits_its_effect_once(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    """A failed attempt's effect rolls back and the retry writes it; where the job store shares
    the database, the job is completed in the handler's transaction (its settlement says so)."""
    inbox = effects_db.inbox
    attempts: list[int] = []
    completed_in_transaction: list[bool] = []

    @job_handler(JOB, inbox=inbox, backoff=lambda attempt: 0, max_attempts=3)
    def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        attempts.append(ctx.attempt)
        effects_db.write_effect_sync(inbox.sync_session, ctx.id)
        if ctx.attempt == 1:
            raise Boom("the first attempt fails after its write")
        settlement = ctx.settlement
        assert settlement is not None
        completed_in_transaction.append(settlement.completed)  # still in the block: not yet

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    with captured_logs("WARNING") as logs:
        assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert attempts == [1, 2]
    assert completed_in_transaction == [False]
    assert await effects_db.effect_count(job_id) == 1
    info = await jobs.driver.get_job(job_id)
    assert info is not None
    assert info.attempts == 2
    assert job_warnings(logs) == []


async def test_a_def_handler_completes_its_job_in_the_transaction_on_a_shared_database(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    settlements: list[AttemptSettlement] = []

    @job_handler(JOB, inbox=effects_db.inbox)
    def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        assert ctx.settlement is not None
        settlements.append(ctx.settlement)
        effects_db.write_effect_sync(effects_db.inbox.sync_session, ctx.id)

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    with captured_logs("WARNING") as logs:
        assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    [settlement] = settlements
    assert settlement.completed is jobs.shares_database
    assert job_warnings(logs) == []


async def test_a_def_handler_is_skipped_when_an_earlier_execution_committed(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    calls: list[str] = []

    @job_handler(JOB, inbox=effects_db.inbox)
    def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        calls.append(ctx.id)

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    async with effects_db.inbox.once(context_of(job_id)):
        await effects_db.write_effect(job_id)  # the crashed execution's commit
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert calls == []
    assert await effects_db.effect_count(job_id) == 1


class AsyncOnlyInbox:
    def once(self, ctx: InboxJob) -> AbstractAsyncContextManager[bool]:
        raise AssertionError("never entered")


def test_a_def_handler_needs_an_inbox_with_once_sync() -> None:
    @job_handler(JOB, inbox=AsyncOnlyInbox())
    def handler(payload: dict[str, Any]) -> None:
        return None

    with pytest.raises(TypeError, match=r"has no once_sync\(ctx\)"):
        registry_of(handler)


async def test_a_handlers_result_is_kept_whoever_completes_the_job(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    """The return value of a handler with ``inbox=`` is kept with the job, async or def, also
    where the inbox completes the job in its own transaction (a shared database)."""

    @job_handler("effects.async", inbox=effects_db.inbox)
    async def async_handler(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        await effects_db.write_effect(ctx.id)
        return {"pages": payload["n"]}

    @job_handler("effects.def", inbox=effects_db.inbox)
    def def_handler(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        effects_db.write_effect_sync(effects_db.inbox.sync_session, ctx.id)
        return {"pages": payload["n"]}

    queue = JobQueue(jobs.driver)
    for handler, job_type in ((async_handler, "effects.async"), (def_handler, "effects.def")):
        job_id = await queue.enqueue(job_type, {"n": 3})
        assert job_id is not None
        assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
        info = await jobs.driver.get_job(job_id)
        assert info is not None
        assert info.result == {"pages": 3}, job_type
        assert await effects_db.effect_count(job_id) == 1
