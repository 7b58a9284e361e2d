"""Construction, client ownership on close, and errors at the boundary."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from jobs.errors import DriverError, StoreUnavailableError
from jobs.testing import new_request
from redis_jobs import RedisJobDriver
from tests.support import wait_until

from .harness import REDIS_URL, RedisHarness, closed_port

pytestmark = pytest.mark.redis


async def connections_named(admin: Redis, name: str) -> int:
    return sum(1 for entry in await admin.client_list() if entry.get("name") == name)


async def test_a_borrowed_client_stays_open(harness: RedisHarness, admin: Redis) -> None:
    name = f"borrowed-{uuid.uuid4().hex}"
    client = harness.client(name)
    driver = harness.redis_driver(client=client)
    await driver.enqueue(new_request())
    await driver.wait_for_work(["t"], 1)
    await driver.close()
    assert await client.ping()
    assert await connections_named(admin, name) >= 1


async def test_a_client_made_from_a_url_is_closed(harness: RedisHarness, admin: Redis) -> None:
    name = f"owned-{uuid.uuid4().hex}"
    driver = RedisJobDriver(url=f"{REDIS_URL}?client_name={name}", namespace=harness.namespace)
    await driver.enqueue(new_request())
    await driver.wait_for_work(["other"], 1)
    assert await connections_named(admin, name) >= 2
    await driver.close()

    async def gone() -> bool:
        return await connections_named(admin, name) == 0

    await wait_until(gone, message=f"the connections of {name} to close")


async def test_a_closed_driver_refuses_calls(harness: RedisHarness) -> None:
    driver = harness.redis_driver()
    await driver.close()
    await driver.close()
    with pytest.raises(DriverError):
        await driver.enqueue(new_request())
    with pytest.raises(DriverError):
        await driver.claim(1, 1_000, ["t"])


def test_the_driver_takes_a_client_or_a_url() -> None:
    with pytest.raises(ValueError):
        RedisJobDriver()
    with pytest.raises(ValueError):
        RedisJobDriver(Redis(), url=REDIS_URL)
    with pytest.raises(ValueError):
        RedisJobDriver(Redis(), retain_completed_ms=-1)


async def test_an_unreachable_server_raises_store_unavailable() -> None:
    driver = RedisJobDriver(url=f"redis://127.0.0.1:{closed_port()}/0", namespace="nowhere")
    try:
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: driver.enqueue(new_request()),
            lambda: driver.claim(1, 1_000, ["t"]),
            lambda: driver.complete("id", "1:x:t"),
            lambda: driver.get_job("id"),
            driver.counts,
            lambda: driver.wait_for_work(["t"], 1_000),
        ]
        for call in calls:
            with pytest.raises(StoreUnavailableError) as raised:
                await call()
            assert isinstance(raised.value.__cause__, redis_errors.ConnectionError)
    finally:
        await driver.close()


@pytest.mark.parametrize(
    "options",
    [{"decode_responses": True}, {"protocol": 2}, {"protocol": 3}],
    ids=["decoded", "resp2", "resp3"],
)
async def test_any_borrowed_client_configuration_works(
    harness: RedisHarness, options: dict[str, Any]
) -> None:
    client = Redis.from_url(REDIS_URL, **options)
    try:
        driver = harness.redis_driver(client=client)
        job_id = await driver.enqueue(
            new_request(payload_json='{"é":1}', key="k", trace_context="tc")
        )
        [job] = await driver.claim(1, 1_000, ["t"])
        assert (job.id, job.key, job.trace_context, job.payload) == (job_id, "k", "tc", '{"é":1}')
        assert await driver.heartbeat(job.id, job.lease_token, 1_000)
        info = await driver.get_job(job.id)
        assert info is not None
        assert (info.state, info.payload, info.key) == ("active", {"é": 1}, "k")
        assert await driver.complete(job.id, job.lease_token)
        assert (await driver.counts())["completed"] == 1
        await driver.wait_for_work(["t"], 1)
        await driver.close()
    finally:
        await client.aclose()


async def test_a_kept_connection_killed_between_calls_is_replaced(
    harness: RedisHarness, admin: Redis
) -> None:
    # The connection the driver keeps between calls goes through the client's retry policy
    # like a pooled one: one retry on a fresh connection.
    name = f"kept-{uuid.uuid4().hex}"
    client = Redis.from_url(f"{REDIS_URL}?client_name={name}", retry=Retry(NoBackoff(), 1))
    try:
        driver = harness.redis_driver(client=client)
        await driver.enqueue(new_request())
        for entry in await admin.client_list():
            if entry.get("name") == name:
                await admin.client_kill_filter(_id=entry["id"])
        assert await connections_named(admin, name) == 0
        assert await driver.enqueue(new_request()) is not None
        await driver.close()
    finally:
        await client.aclose()


async def test_close_hands_the_kept_connection_back_to_a_borrowed_pool(
    harness: RedisHarness,
) -> None:
    client = harness.client()
    driver = harness.redis_driver(client=client)
    await driver.enqueue(new_request())
    pool = client.connection_pool
    await driver.close()
    assert not pool._in_use_connections  # type: ignore[attr-defined]
