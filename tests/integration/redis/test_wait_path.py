"""The wake-up path's cost: what stands between an enqueue and its handler's start on Redis.

Issue 17 pins the single-job start latency at or below its base; on this machine wall clock is
too noisy to test it, so these tests count what makes it: event-loop callbacks on the way, and
connections taken from the client's pool.
"""

from __future__ import annotations

import asyncio
import statistics
import uuid
from asyncio import events
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import ConnectionPool

from jobs import JobHandlerRegistry, JobQueue, JobRunner, JobsSettings
from jobs.testing import new_request
from tests.support import wait_until

from .harness import RedisHarness, blocked_in_blpop

pytestmark = pytest.mark.redis

SAMPLES = 11
MAX_CALLBACKS = 10
"""An enqueue, the waiter's BLPOP reply, a claim and the handler's start: 9 at base (3c8aaef)."""
DEADLINE_S = 5.0


class Callbacks:
    """Counts the event loop's callbacks while ``counting``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counting = False
        self.count = 0
        run = events.Handle._run

        def counted(handle: events.Handle) -> None:
            if self.counting:
                self.count += 1
            run(handle)

        monkeypatch.setattr(events.Handle, "_run", counted)


def pool_gets(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list: how many connections were taken from a redis-py pool."""
    gets = [0]
    get = ConnectionPool.get_connection

    async def counted(self: ConnectionPool, *args: Any, **kwargs: Any) -> Any:
        gets[0] += 1
        return await get(self, *args, **kwargs)

    monkeypatch.setattr(ConnectionPool, "get_connection", counted)
    return gets


async def test_an_idle_runner_starts_a_job_within_ten_loop_callbacks_of_its_enqueue(
    harness: RedisHarness, admin: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"runner-{uuid.uuid4().hex}"
    driver = harness.redis_driver(client=harness.client(name), clock=None)
    queue = JobQueue(driver)
    callbacks = Callbacks(monkeypatch)
    counts: list[int] = []
    started = asyncio.Event()

    async def handler(payload: Any) -> None:
        counts.append(callbacks.count)
        callbacks.counting = False
        started.set()

    registry = JobHandlerRegistry()
    registry.register("t", handler)
    runner = JobRunner(driver, registry, JobsSettings(poll_interval_ms=10_000))
    runner.start()
    try:
        for sample in range(SAMPLES + 1):  # the first warms the connections up

            async def idle(settled: int = sample) -> bool:
                return runner.stats["completed"] == settled and (
                    await blocked_in_blpop(admin, name) == 1
                )

            await wait_until(idle, message="the runner idle in its BLPOP")
            started.clear()
            callbacks.count, callbacks.counting = 0, True
            await queue.enqueue("t", {})
            await asyncio.wait_for(started.wait(), DEADLINE_S)
    finally:
        callbacks.counting = False
        await runner.close()
    assert statistics.median(counts[1:]) <= MAX_CALLBACKS, counts


async def test_waits_and_calls_in_flight_at_once_take_no_connection_from_the_pool(
    harness: RedisHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver keeps its connections between uses: the BLPOP's, and one for each of an
    # enqueue and a claim in flight at once (a runner and a producer sharing the driver).
    driver = harness.redis_driver(clock=None)
    await asyncio.gather(driver.enqueue(new_request()), driver.claim(1, 30_000, ["t"]))
    await driver.wait_for_work(["other"], 1)
    gets = pool_gets(monkeypatch)
    for _ in range(5):
        await asyncio.gather(driver.enqueue(new_request()), driver.claim(1, 30_000, ["t"]))
        await driver.wait_for_work(["other"], 1)
    assert gets[0] == 0
