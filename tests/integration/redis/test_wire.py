"""RedisWire: pipelined replies in order, the client's settings, failures that reconnect."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from jobs.errors import StoreUnavailableError
from redis_jobs.resp import ReplyError, pack_command
from redis_jobs.wire import RedisWire
from tests.support import wait_until

from .harness import REDIS_URL, closed_port

pytestmark = pytest.mark.redis


@pytest.fixture
async def client() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL, client_name=f"wire-{uuid.uuid4().hex}")
    yield client
    await client.aclose()


@pytest.fixture
async def wire(client: Redis) -> AsyncIterator[RedisWire]:
    wire = RedisWire(client)
    yield wire
    await wire.close()


async def call(wire: RedisWire, *args: Any) -> Any:
    return await wire.request(pack_command(args))


async def test_concurrent_calls_get_their_own_replies(wire: RedisWire) -> None:
    replies = await asyncio.gather(*(call(wire, "ECHO", f"reply {n}") for n in range(500)))
    assert replies == [f"reply {n}".encode() for n in range(500)]


async def test_an_error_reply_is_returned_to_its_caller_only(wire: RedisWire) -> None:
    replies = await asyncio.gather(
        call(wire, "ECHO", "a"), call(wire, "NOSUCH"), call(wire, "PING")
    )
    assert replies[0] == b"a"
    assert isinstance(replies[1], ReplyError)
    assert "NOSUCH" in replies[1].text.upper()
    assert replies[2] == b"PONG"


async def test_the_connection_has_the_client_settings(admin: Redis) -> None:
    name = f"wire-db-{uuid.uuid4().hex}"
    client = Redis.from_url(REDIS_URL.rsplit("/", 1)[0] + "/3", client_name=name)
    wire = RedisWire(client)
    try:
        await call(wire, "PING")
        [entry] = [entry for entry in await admin.client_list() if entry.get("name") == name]
        assert entry["db"] == "3"
    finally:
        await wire.close()
        await client.aclose()


async def test_a_dropped_connection_fails_the_waiting_calls_and_the_next_call_reconnects(
    wire: RedisWire, admin: Redis
) -> None:
    wire_id = await call(wire, "CLIENT", "ID")
    waiting = asyncio.ensure_future(call(wire, "BLPOP", f"wire-test-{uuid.uuid4().hex}", 10))
    await asyncio.sleep(0)
    assert await admin.client_kill_filter(_id=wire_id) == 1
    with pytest.raises(StoreUnavailableError, match="closed the connection"):
        await asyncio.wait_for(waiting, 5)
    assert await call(wire, "PING") == b"PONG"
    assert await call(wire, "CLIENT", "ID") != wire_id


async def test_a_reply_that_never_comes_times_out_and_the_next_call_reconnects(
    wire: RedisWire,
) -> None:
    wire.reply_timeout_s = 0.2
    blocked = call(wire, "BLPOP", f"wire-test-{uuid.uuid4().hex}", 10)
    with pytest.raises(StoreUnavailableError, match=r"did not reply within 0\.2 s"):
        await asyncio.wait_for(blocked, 5)
    assert await call(wire, "PING") == b"PONG"


async def test_an_unreachable_server_fails_each_call() -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{closed_port()}/0")
    wire = RedisWire(client)
    try:
        for _ in range(2):
            with pytest.raises(StoreUnavailableError):
                await call(wire, "PING")
    finally:
        await wire.close()
        await client.aclose()


async def test_close_ends_the_connection(client: Redis, admin: Redis) -> None:
    name = client.connection_pool.connection_kwargs["client_name"]
    wire = RedisWire(client)
    await call(wire, "PING")
    await wire.close()

    async def gone() -> bool:
        return all(entry.get("name") != name for entry in await admin.client_list())

    await wait_until(gone, message=f"the connection {name} to close")
    with pytest.raises(Exception, match="closed"):
        await call(wire, "PING")


async def test_a_call_after_the_connection_closed_under_the_wire_reconnects(
    wire: RedisWire,
) -> None:
    assert await call(wire, "PING") == b"PONG"
    blocked = asyncio.ensure_future(call(wire, "BLPOP", f"wire-test-{uuid.uuid4().hex}", 10))
    await asyncio.sleep(0)
    transport = wire._transport
    assert transport is not None
    transport.abort()  # as a failed write does: closing now, connection_lost a tick later
    assert await call(wire, "ECHO", "after") == b"after"
    with pytest.raises(StoreUnavailableError):
        await blocked
