"""Without an injected clock, Redis TIME alone decides due-ness and lease expiry."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from jobs.clock import to_epoch_ms
from jobs.testing import new_request

from .harness import RedisHarness

pytestmark = pytest.mark.redis

LEASE_MS = 200


async def test_a_short_lease_expires_by_redis_time(harness: RedisHarness, admin: Redis) -> None:
    driver = harness.redis_driver(clock=None)
    job_id = await driver.enqueue(new_request())
    assert job_id is not None
    claimed_at = time.monotonic()  # before the claim: its lease starts no earlier
    [first] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.claim(1, LEASE_MS, ["t"]) == []

    deadline = claimed_at + 5
    while not (again := await driver.claim(1, LEASE_MS, ["t"])):
        assert time.monotonic() < deadline, "the lease never expired"
        await asyncio.sleep(0.005)
    assert time.monotonic() - claimed_at >= (LEASE_MS - 2) / 1000  # TIME is floored to ms
    assert (again[0].id, again[0].attempt, again[0].stalls) == (job_id, 1, 1)
    assert again[0].lease_token != first.lease_token
    assert await driver.complete(job_id, first.lease_token) is False


async def test_run_at_is_stamped_by_redis_time(harness: RedisHarness, admin: Redis) -> None:
    driver = harness.redis_driver(clock=None)
    seconds, micros = await admin.time()
    job_id = await driver.enqueue(new_request(delay_ms=1_000))
    assert job_id is not None
    info = await driver.get_job(job_id)
    assert info is not None
    redis_now = seconds * 1000 + micros // 1000
    assert redis_now + 1_000 <= to_epoch_ms(info.run_at) <= redis_now + 1_000 + 5_000
    assert await driver.claim(1, LEASE_MS, ["t"]) == []
