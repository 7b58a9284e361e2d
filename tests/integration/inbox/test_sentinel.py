"""The inbox with jobs on Redis behind Sentinel (a private primary, replica and sentinel) and
effects on SQLite or PostgreSQL: a failed attempt's effects roll back and the retry commits
them once; a re-run after the commit skips them, from an async and from a def handler."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from jobs import JobContext, JobQueue, job_handler
from redis_jobs import RedisJobDriver

from ..redis.topologies import PrivateSentinel
from .conftest import EffectsDb
from .test_handlers import JOB, Boom, Jobs, registry_of, run_until_finished

pytestmark = [pytest.mark.cluster, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSentinel]:
    started = PrivateSentinel(tmp_path_factory.mktemp("sentinel"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
async def jobs(group: PrivateSentinel) -> AsyncIterator[Jobs]:
    namespace = f"inbox-{uuid.uuid4().hex[:8]}"
    driver = RedisJobDriver(url=group.url, namespace=namespace, replicas=1)
    try:
        yield Jobs("redis-sentinel", driver, group.url, namespace, False)
    finally:
        await driver.close()


async def test_an_async_handler_commits_its_effect_once_across_a_retry(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
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
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert firsts == [True, False]
    assert await effects_db.effect_count(job_id) == 1


async def test_a_def_handlers_failed_attempt_rolls_back_and_the_retry_commits_once(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    attempts: list[int] = []

    @job_handler(JOB, inbox=effects_db.inbox, backoff=lambda attempt: 0, max_attempts=3)
    def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        attempts.append(ctx.attempt)
        effects_db.write_effect_sync(effects_db.inbox.sync_session, ctx.id)
        if ctx.attempt == 1:
            raise Boom("the first attempt fails after its write")

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert attempts == [1, 2]
    assert await effects_db.effect_count(job_id) == 1


async def test_a_def_handlers_rerun_after_its_commit_skips_the_effect(
    jobs: Jobs, effects_db: EffectsDb
) -> None:
    firsts: list[bool] = []

    @job_handler(JOB, backoff=lambda attempt: 0, max_attempts=3)
    def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        with effects_db.inbox.once_sync(ctx) as first:
            firsts.append(first)
            if first:
                effects_db.write_effect_sync(effects_db.inbox.sync_session, ctx.id)
        if ctx.attempt == 1:
            raise Boom("failed after the commit")

    job_id = await JobQueue(jobs.driver).enqueue(JOB, {})
    assert job_id is not None
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert firsts == [True, False]
    assert await effects_db.effect_count(job_id) == 1
