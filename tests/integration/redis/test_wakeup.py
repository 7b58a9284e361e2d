"""Wake-up: an idle runner blocked in wait_for_work learns of new work from any client at once."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from redis.asyncio import Redis

from jobs.testing import new_request
from redis_jobs import RedisJobDriver
from tests.support import wait_until

from .harness import RedisHarness, blocked_in_blpop

pytestmark = pytest.mark.redis

DEADLINE_S = 2.0
FOREVER_MS = 60_000


def waiter(harness: RedisHarness) -> tuple[RedisJobDriver, str]:
    """A driver on its own named client, as a runner in another process would have."""
    name = f"waiter-{uuid.uuid4().hex}"
    return harness.redis_driver(client=harness.client(name), clock=None), name


async def blocked(admin: Redis, name: str, count: int = 1) -> None:
    """Wait until exactly ``count`` connections named ``name`` sit in BLPOP."""

    async def in_blpop() -> bool:
        return await blocked_in_blpop(admin, name) == count

    await wait_until(in_blpop, message=f"{count} BLPOP from {name}")


async def test_an_enqueue_through_another_client_wakes_a_waiter(
    harness: RedisHarness, admin: Redis
) -> None:
    consumer, name = waiter(harness)
    producer = harness.redis_driver(clock=None)
    waiting = asyncio.create_task(consumer.wait_for_work(["t"], FOREVER_MS))
    await blocked(admin, name)
    started = time.monotonic()
    await producer.enqueue(new_request())
    await asyncio.wait_for(waiting, DEADLINE_S)
    assert time.monotonic() - started < DEADLINE_S
    assert len(await consumer.claim(10, 30_000, ["t"])) == 1


async def test_each_enqueued_job_wakes_one_waiter(harness: RedisHarness, admin: Redis) -> None:
    (first, first_name), (second, second_name) = waiter(harness), waiter(harness)
    producer = harness.redis_driver(clock=None)
    waiting = [
        asyncio.create_task(first.wait_for_work(["t"], FOREVER_MS)),
        asyncio.create_task(second.wait_for_work(["t"], FOREVER_MS)),
    ]
    await blocked(admin, first_name)
    await blocked(admin, second_name)
    await asyncio.gather(producer.enqueue(new_request()), producer.enqueue(new_request()))
    await asyncio.wait_for(asyncio.gather(*waiting), DEADLINE_S)


async def test_a_waiter_is_not_woken_by_other_types(harness: RedisHarness, admin: Redis) -> None:
    consumer, name = waiter(harness)
    producer = harness.redis_driver(clock=None)
    started = time.monotonic()
    waiting = asyncio.create_task(consumer.wait_for_work(["a"], 300))
    await blocked(admin, name)
    await producer.enqueue(new_request("b"))
    await asyncio.wait_for(waiting, DEADLINE_S)
    assert time.monotonic() - started >= 0.29


async def test_the_wait_ends_when_the_next_job_is_due(harness: RedisHarness) -> None:
    driver = harness.redis_driver(clock=None)
    await driver.enqueue(new_request(delay_ms=300))
    started = time.monotonic()
    await asyncio.wait_for(driver.wait_for_work(["t"], FOREVER_MS), DEADLINE_S)
    assert time.monotonic() - started >= 0.2
    assert len(await driver.claim(1, 30_000, ["t"])) == 1


async def test_due_work_returns_at_once(harness: RedisHarness) -> None:
    driver = harness.redis_driver(clock=None)
    await driver.enqueue(new_request())
    await asyncio.wait_for(driver.wait_for_work(["t"], FOREVER_MS), DEADLINE_S)
    await driver.wait_for_work([], 0)


async def test_close_ends_a_blocked_wait(harness: RedisHarness, admin: Redis) -> None:
    consumer, name = waiter(harness)
    waiting = asyncio.create_task(consumer.wait_for_work(["t"], FOREVER_MS))
    await blocked(admin, name)
    await consumer.close()
    await asyncio.wait_for(waiting, DEADLINE_S)
    await blocked(admin, name, count=0)
