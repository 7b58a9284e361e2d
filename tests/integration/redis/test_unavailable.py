"""A Redis that is full, busy or cuts connections, on a private server: typed errors, recovery.

A caller that retries on StoreUnavailableError rides through each of these (issue 18): the
driver raises it (or a named subclass) while the condition lasts and works again after.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis import exceptions as redis_errors

from jobs.errors import StoreUnavailableError
from jobs.testing import new_request
from redis_jobs import RedisJobDriver, RedisOutOfMemoryError
from tests.support import wait_until

from .redis_server import RedisServers

pytestmark = pytest.mark.redis


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[RedisServers]:
    started = RedisServers(tmp_path)
    try:
        yield started
    finally:
        await started.stop_all()


async def test_a_full_redis_refuses_with_a_named_error_and_recovers(servers: RedisServers) -> None:
    server = await servers.start("--maxmemory-policy", "noeviction")
    admin = server.admin()
    driver = RedisJobDriver(url=server.url, namespace="full")
    try:
        assert await driver.enqueue(new_request()) is not None
        used = int((await admin.info("memory"))["used_memory"])
        await admin.config_set("maxmemory", used // 2)  # over the limit from now on
        with pytest.raises(RedisOutOfMemoryError, match="out of memory") as raised:
            await driver.enqueue(new_request())
        assert isinstance(raised.value, StoreUnavailableError)
        assert (await driver.counts())["pending"] == 1  # reads still work, nothing half-written
        await admin.config_set("maxmemory", 0)
        assert await driver.enqueue(new_request()) is not None
    finally:
        await driver.close()
        await admin.aclose()


async def test_a_busy_redis_is_unavailable_until_the_script_is_killed(
    servers: RedisServers,
) -> None:
    server = await servers.start("--busy-reply-threshold", "50")
    admin, runaway = server.admin(), server.admin()
    driver = RedisJobDriver(url=server.url, namespace="busy")
    spinning = asyncio.create_task(runaway.eval("while true do end", 0))
    try:

        async def busy() -> bool:
            try:
                await driver.enqueue(new_request())
            except StoreUnavailableError as error:
                return "BUSY" in str(error)
            return False

        await wait_until(busy, timeout=10, message="the driver to see Redis busy")
        await admin.script_kill()
        with pytest.raises(redis_errors.ResponseError):
            await spinning
        assert await driver.enqueue(new_request()) is not None
    finally:
        spinning.cancel()
        await asyncio.gather(spinning, return_exceptions=True)
        await driver.close()
        await admin.aclose()
        await runaway.aclose()


async def test_killed_connections_are_discarded_not_reused(servers: RedisServers) -> None:
    server = await servers.start()
    admin = server.admin()
    driver = RedisJobDriver(url=server.url, namespace="killed")
    try:
        assert await driver.enqueue(new_request()) is not None
        before = {entry["id"] for entry in await admin.client_list()}
        assert await admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        for _ in range(5):  # each call reconnects (the client made from url retries it)
            assert await driver.enqueue(new_request()) is not None
        after = {entry["id"] for entry in await admin.client_list()}
        assert (before & after) == {(await admin.client_id()).__str__()}
        assert (await driver.counts())["pending"] == 6
    finally:
        await driver.close()
        await admin.aclose()
