"""The inbox with jobs on a private Redis Cluster (3 masters, a replica each) and effects on
SQLite or PostgreSQL: a re-run after the effects committed skips them; a stale holder and the
new one at once commit one effect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobs import JobContext, JobQueue, job_handler
from jobs.spi import AttemptSettlement, ClaimedJob
from tests.integration.redis.harness import RedisHarness, cluster_at
from tests.integration.redis.topologies import PrivateCluster

from .conftest import EffectsDb, context_of
from .test_handlers import DEADLINE_S, JOB, Boom, Jobs, registry_of, run_until_finished

pytestmark = [pytest.mark.cluster, pytest.mark.redis]


@pytest.fixture
async def harness(cluster: PrivateCluster) -> AsyncIterator[RedisHarness]:
    made = RedisHarness(connect=cluster_at(cluster.url))
    try:
        yield made
    finally:
        await made.cleanup()


async def test_a_rerun_after_the_commit_skips_the_effects(
    harness: RedisHarness, effects_db: EffectsDb
) -> None:
    driver = harness.redis_driver(clock=None)
    jobs = Jobs("redis-cluster", driver, None, harness.namespace, False)
    firsts: list[bool] = []

    @job_handler(JOB, backoff=lambda attempt: 0, max_attempts=3)
    async def handler(payload: dict[str, Any], ctx: JobContext) -> None:
        async with effects_db.inbox.once(ctx) as first:
            firsts.append(first)
            if first:
                await effects_db.write_effect(ctx.id)
        if ctx.attempt == 1:
            raise Boom("failed after the commit")

    job_id = await JobQueue(driver).enqueue(JOB, {})
    assert job_id is not None
    assert await run_until_finished(jobs, registry_of(handler), job_id) == "completed"
    assert firsts == [True, False]
    assert await effects_db.effect_count(job_id) == 1


async def test_a_stale_holder_and_the_new_one_commit_one_effect(
    harness: RedisHarness, effects_db: EffectsDb
) -> None:
    driver = harness.redis_driver()  # the harness's ManualClock: the lease expires at will
    job_id = await JobQueue(driver).enqueue(JOB, {})
    assert job_id is not None
    [stale] = await driver.claim(1, 1_000, [JOB])
    harness.clock.advance(5_000)
    [holder] = await driver.claim(1, 10_000, [JOB])
    assert holder.reclaimed
    barrier = asyncio.Barrier(2)
    firsts: list[bool] = []

    async def execution(claimed: ClaimedJob) -> None:
        settlement = AttemptSettlement(driver, claimed.id, claimed.lease_token)
        ctx = context_of(claimed.id, settlement=settlement, attempt=claimed.attempt)
        await barrier.wait()
        async with effects_db.inbox.once(ctx) as first:
            firsts.append(first)
            if first:
                await effects_db.write_effect(claimed.id)

    async with asyncio.timeout(DEADLINE_S):
        await asyncio.gather(execution(stale), execution(holder))
    assert sorted(firsts) == [False, True]
    assert await effects_db.effect_count(job_id) == 1
    assert await driver.complete(holder.id, holder.lease_token)
    assert not await driver.complete(stale.id, stale.lease_token)
