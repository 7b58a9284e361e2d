"""redis_jobs/_compat.py: the private attributes of redis-py and asyncio the driver reads are
still there (if one goes upstream the driver still works, on the public path, but slower: this
test is how an upgrade says so)."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from redis_jobs._compat import ready_queue_empty, stream_writer
from redis_jobs.wire import DIRECT_SEND
from tests.stores import REDIS_URL


async def test_a_connected_redis_py_connection_has_a_stream_writer() -> None:
    client = Redis.from_url(REDIS_URL)
    try:
        connection = await client.connection_pool.get_connection()
        try:
            assert stream_writer(connection) is None or connection.is_connected
            await connection.connect()
            writer = stream_writer(connection)
            assert isinstance(writer, asyncio.StreamWriter), (
                "redis-py's connections no longer keep their asyncio.StreamWriter in `_writer`: "
                f"wire.send now takes send_packed_command (slower on Python 3.11: DIRECT_SEND="
                f"{DIRECT_SEND}); see redis_jobs/_compat.py"
            )
            await connection.disconnect()
            assert stream_writer(connection) is None
        finally:
            await client.connection_pool.release(connection)
    finally:
        await client.aclose()


def test_the_event_loop_has_a_ready_queue() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert hasattr(loop, "_ready"), (
            "asyncio's event loop no longer keeps its ready queue in `_ready`: the Redis "
            "coalescer now waits a pass for every call; see redis_jobs/_compat.py"
        )
        assert ready_queue_empty(loop)
        loop.call_soon(lambda: None)
        assert not ready_queue_empty(loop)
        loop.run_until_complete(asyncio.sleep(0))
        assert ready_queue_empty(loop)
    finally:
        loop.close()


def test_a_loop_without_a_ready_queue_always_waits_the_pass() -> None:
    class Bare:
        pass

    assert ready_queue_empty(Bare()) is False  # type: ignore[arg-type]
