"""The inbox around real handlers, with jobs on every driver (in-process, SQLite, PostgreSQL,
Redis, and a SQLAlchemy store on the effects' own database) and effects on SQLite or PostgreSQL.

The identity is the job, not the attempt: a failed attempt's effects roll back and the retry
runs them; once they committed, a re-run skips them and the job completes; concurrent
executions of one job (a stale holder and the new one) commit one effect. When the job store
shares the effects' database, the job is completed in the inbox's transaction.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobs import (
    InProcessJobDriver,
    JobContext,
    JobDriver,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsSettings,
    ManualClock,
    job_handler,
)
from jobs.errors import DriverError
from jobs.spi import AttemptSettlement, ClaimedJob
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import SQLAlchemyJobStore
from redis_jobs import RedisJobDriver
from tests.stores import POSTGRES_URL, REDIS_URL
from tests.support import captured_logs, wait_until

from .conftest import EffectsDb, context_of

JOB = "effects.write"
DEADLINE_S = 15.0
SETTINGS = JobsSettings(poll_interval_ms=50, lease_ms=10_000)

JOB_KINDS = [
    pytest.param("inprocess", id="jobs-inprocess"),
    pytest.param("sqlite", id="jobs-sqlite"),
    pytest.param("postgres", id="jobs-postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="jobs-redis", marks=pytest.mark.redis),
    pytest.param("same-db", id="jobs-same-db"),
]


@dataclass
class Jobs:
    kind: str
    driver: JobDriver
    url: str | None
    namespace: str
    shares_database: bool
    """A SQL store on the effects' database: "same-db", and PostgreSQL jobs beside PostgreSQL
    effects (one test database)."""


def open_jobs(kind: str, db: EffectsDb, tmp_path: Path, clock: ManualClock | None) -> Jobs:
    namespace = f"j{uuid.uuid4().hex[:10]}_"
    if kind == "inprocess":
        return Jobs(kind, InProcessJobDriver(clock=clock), None, namespace, False)
    if kind == "redis":
        driver = RedisJobDriver(url=REDIS_URL, namespace=namespace, clock=clock)
        return Jobs(kind, driver, REDIS_URL, namespace, False)
    url = {
        "sqlite": f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}",
        "postgres": POSTGRES_URL,
        "same-db": db.url,
    }[kind]
    if kind == "same-db":
        namespace = db.prefix  # dropped with the effects' tables
    store = SQLAlchemyJobStore(url, table_prefix=namespace, clock=clock)
    return Jobs(kind, store, url, namespace, url == db.url)


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


async def run_until_finished(jobs: Jobs, registry: JobHandlerRegistry, job_id: str) -> str:
    """Run a runner until the job is finished (completed or failed); its state."""
    runner = JobRunner(jobs.driver, registry, SETTINGS)
    runner.start()
    state = ""

    async def finished() -> bool:
        nonlocal state
        info = await jobs.driver.get_job(job_id)
        state = info.state if info is not None else "gone"
        return state in ("completed", "failed")

    try:
        await wait_until(finished, timeout=DEADLINE_S, interval=0.02, message="the job finished")
    finally:
        await runner.close(drain_timeout_ms=5_000)
    return state


def registry_of(function: Callable[..., Awaitable[Any]]) -> JobHandlerRegistry:
    registry = JobHandlerRegistry()
    registry.add(function)
    return registry


class Boom(Exception):
    pass


def job_warnings(logs: list[dict[str, Any]]) -> list[str]:
    """The warnings about jobs (a refused settle, a lost lease, an interrupted handler): not
    those a store may log about its connections meanwhile."""
    words = ("reclaimed", "lease", "interrupted", "raised")
    return [log["message"] for log in logs if any(word in log["message"] for word in words)]


async def test_a_failed_attempts_effects_roll_back_and_the_retry_runs_them(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    calls: list[int] = []

    @job_handler(JOB, inbox=effects_db.inbox, backoff=lambda attempt: 0, max_attempts=3)
    async def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        await effects_db.write_effect(ctx.id)
        if ctx.attempt == 1:
            raise Boom("the first attempt fails after its write")

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert calls == [1, 2]
    assert await effects_db.effect_count(job_id) == 1
    info = await jobs.driver.get_job(job_id)
    assert info is not None
    assert info.attempts == 2


async def test_a_rerun_after_committed_effects_is_skipped_and_the_job_completed(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    """The worker committed the effects, then crashed before settling: the re-run (here, the
    first run this runner makes) finds the record, skips the handler and completes the job."""
    calls: list[int] = []

    @job_handler(JOB, inbox=effects_db.inbox)
    async def handler(payload: dict[str, Any]) -> None:
        calls.append(1)
        await effects_db.write_effect("again")

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {}, key=f"k-{uuid.uuid4().hex}")
    info = await jobs.driver.get_job(job_id or "")
    assert info is not None
    assert job_id is not None
    async with effects_db.inbox.once(context_of(job_id, key=info.key)) as first:
        assert first
        await effects_db.write_effect(job_id)  # the crashed execution's commit
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert calls == []
    assert await effects_db.effect_count() == 1


async def test_an_error_after_the_commit_reruns_without_repeating_the_effects(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    """The handler's effects commit (``once`` as a block), then it fails, as a worker killed
    after its commit would. Where the job store shares the database, the job was completed in
    that commit and stays completed; elsewhere it is retried, and the retry skips the effects."""
    firsts: list[bool] = []

    @job_handler(JOB, backoff=lambda attempt: 0, max_attempts=3)
    async def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        async with effects_db.inbox.once(ctx) as first:
            firsts.append(first)
            if first:
                await effects_db.write_effect(ctx.id)
        if ctx.attempt == 1:
            raise Boom("failed after the commit")

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    with captured_logs("WARNING") as logs:
        assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert await effects_db.effect_count(job_id) == 1
    info = await jobs.driver.get_job(job_id)
    assert info is not None
    if jobs.shares_database:
        assert firsts == [True]
        assert info.attempts == 1
        assert any("stays completed" in log["message"] for log in logs)
    else:
        assert firsts == [True, False]
        assert info.attempts == 2
    assert not any("reclaimed before it settled" in log["message"] for log in logs)


async def test_the_job_is_completed_in_the_inbox_transaction_on_a_shared_database(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    seen: list[str] = []

    @job_handler(JOB)
    async def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        async with effects_db.inbox.once(ctx):
            await effects_db.write_effect(ctx.id)
        info = await jobs.driver.get_job(ctx.id)  # after the commit, before the settle
        seen.append(info.state if info is not None else "gone")

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    with captured_logs("WARNING") as logs:
        assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert seen == (["completed"] if jobs.shares_database else ["active"])
    assert job_warnings(logs) == []  # the runner's settle after it: no error, no warning


@pytest.mark.postgres
@pytest.mark.redis
async def test_concurrent_executions_of_one_job_commit_one_effect(
    effects_db: EffectsDb, tmp_path: Path
) -> None:
    """A stale holder (its lease expired) and the new holder run the job at once."""
    for param in JOB_KINDS:
        kind = str(param.values[0])
        (tmp_path / kind).mkdir()
        await _duplicates_on(kind, effects_db, tmp_path / kind)


async def _duplicates_on(kind: str, effects_db: EffectsDb, tmp_path: Path) -> None:
    clock = ManualClock()
    jobs = open_jobs(kind, effects_db, tmp_path, clock)
    try:
        job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
        assert job_id is not None
        [stale] = await jobs.driver.claim(1, 1_000, [JOB])
        clock.advance(5_000)
        [holder] = await jobs.driver.claim(1, 10_000, [JOB])
        assert holder.reclaimed
        assert holder.lease_token != stale.lease_token
        barrier = asyncio.Barrier(2)
        firsts: list[bool] = []

        async def execution(claimed: ClaimedJob) -> AttemptSettlement:
            settlement = AttemptSettlement(jobs.driver, claimed.id, claimed.lease_token)
            ctx = context_of(claimed.id, settlement=settlement, attempt=claimed.attempt)
            await barrier.wait()
            async with effects_db.inbox.once(ctx) as first:
                firsts.append(first)
                if first:
                    await effects_db.write_effect(f"{kind}:{claimed.id}")
            return settlement

        async with asyncio.timeout(DEADLINE_S):
            settled = await asyncio.gather(execution(stale), execution(holder))
        assert sorted(firsts) == [False, True], kind
        assert await effects_db.effect_count(f"{kind}:{job_id}") == 1, kind
        stale_settled, holder_settled = settled
        assert not stale_settled.completed  # its token is stale: never completed by it
        if jobs.shares_database:
            assert holder_settled.completed
        else:
            assert not holder_settled.completed
            assert await jobs.driver.complete(holder.id, holder.lease_token)
        assert not await jobs.driver.complete(stale.id, stale.lease_token)
        info = await jobs.driver.get_job(job_id)
        assert info is not None, kind
        assert info.state == "completed", kind
    finally:
        await jobs.driver.close()
        if jobs.url is not None and jobs.kind in ("postgres", "redis"):
            await drop_store(jobs.url, jobs.namespace)


def test_inbox_takes_an_inbox() -> None:
    with pytest.raises(TypeError, match="inbox= takes an inbox"):
        job_handler(JOB, inbox=object())  # type: ignore[arg-type]


async def test_a_job_completed_in_the_transaction_is_not_interrupted_after_it(
    effects_db: EffectsDb,
) -> None:
    """The store refuses heartbeats for a job no longer active; once the inbox completed it,
    the runner beats it no more, so the handler's code after the block is not interrupted as
    if the lease were lost. Heartbeats every 100 ms; the handler goes on for 5 of them."""
    store = SQLAlchemyJobStore(effects_db.url, table_prefix=effects_db.prefix)
    settings = JobsSettings(poll_interval_ms=50, lease_ms=1_000, heartbeat_ms=100)
    signals: list[str | None] = []
    done = asyncio.Event()

    @job_handler(JOB)
    async def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        async with effects_db.inbox.once(ctx):
            await effects_db.write_effect(ctx.id)
        await asyncio.sleep(0.5)  # heartbeats would be due (and refused) meanwhile
        signals.append(ctx.signal.reason)
        done.set()

    runner = JobRunner(store, registry_of(handler), settings)
    try:
        job_id = await JobQueue(store).enqueue(JOB, {})
        assert job_id is not None
        with captured_logs("WARNING") as logs:
            runner.start()
            async with asyncio.timeout(DEADLINE_S):
                await done.wait()
            await runner.close(drain_timeout_ms=5_000)
        assert signals == [None]
        assert job_warnings(logs) == []
        info = await store.get_job(job_id)
        assert info is not None
        assert info.state == "completed"
    finally:
        await runner.close()
        await store.close()


async def test_a_job_store_write_inside_the_block_on_its_sqlite_file_fails_at_once(
    tmp_path: Path,
) -> None:
    """On SQLite the block holds the file's write lock: a job store's statement from the same
    task would wait for the block itself until the busy timeout (5 s). It is refused at once,
    naming the outbox, and the block's effects roll back with the error."""
    effects_db = EffectsDb("sqlite", tmp_path)
    await effects_db.setup()
    store = SQLAlchemyJobStore(effects_db.url, table_prefix=effects_db.prefix)
    try:
        await store.create_schema()
        job_id = await JobQueue(store).enqueue(JOB, {})
        assert job_id is not None

        async def follow_up_in_the_block() -> None:
            async with effects_db.inbox.once(context_of(job_id)):
                await effects_db.write_effect(job_id)
                await JobQueue(store).enqueue("follow.up", {})

        with pytest.raises(DriverError, match=r"outbox\.append_in"):
            # under the busy timeout (5 s): refused, not waited out
            await asyncio.wait_for(follow_up_in_the_block(), timeout=2.0)
        assert await effects_db.effect_count(job_id) == 0
        follow_ups = await store.list_jobs(job_type="follow.up")
        assert follow_ups.jobs == []
        other = asyncio.create_task(JobQueue(store).enqueue("after.commit", {}))
        async with effects_db.inbox.once(context_of("another")):
            await effects_db.write_effect("another")
        assert await other is not None  # another task only waited for the commit
    finally:
        await store.close()
        await effects_db.close()
