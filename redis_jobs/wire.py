"""One round trip of pre-packed commands through a pooled connection of a ``redis.asyncio.Redis``.

The driver's calls are FCALLs of 10 to 3,000 arguments. ``Redis.execute_command`` and
``Pipeline.execute`` pack each argument in Python (redis-py's asyncio packer) and wrap the
exchange in per-command bookkeeping; measured on an enqueue (28 arguments) that cost ~50 us of
client CPU on top of the ~110 us of a bare redis-py script call, and ~30 us per job of a bulk
enqueue. Here a command is packed once by hiredis (``hiredis.pack_command``, the C packer
redis-py's own sync client uses) and the round trip goes through redis-py's public connection
API, as ``Pipeline.execute`` does it: a connection from the client's pool (Sentinel: one
connected to the primary it discovered), ``send_packed_command`` (``send``: on Python 3.11
without its task) and one ``read_response`` per command (error replies parsed to redis-py's
exceptions), under the connection's retry policy, released to the pool afterwards.

Between round trips the wire keeps the connections it last used out of the pool (``KEPT`` at
most; more concurrent round trips take others from the pool as usual) and checks one before
its next use as the pool would (``can_read``: pending data or a closed socket means a fresh
connection): measured, the pool's ``get_connection`` and ``release`` cost ~6 us of client CPU
a call in redis-py 8 (a lock, a release event, four connection-count records), some 6% of a
one-by-one enqueue. Two, not one: calls of a runner and a producer sharing a driver overlap
(an idle runner's claim starts while the enqueue that woke it still holds its connection);
with one kept, the latency benchmark took 1.5 connections a job from the pool and a drain
0.07, with two 0.02 and 0.001. A connection the pool lends only a few of (a
``BlockingConnectionPool``, or a pool of fewer than ``KEEP_FROM`` connections) is never kept
(nor is the BLPOP's, ``waiter``): another user of the client could be left waiting for it.
``release`` hands the kept ones back (the driver's close).

Only a plain pooled ``Redis`` (also a Sentinel ``master_for`` client) goes this way; a
``RedisCluster`` (routing, MOVED/ASK) and a single-connection client keep redis-py's command
API (``Wire.of`` returns None for them).
"""

from __future__ import annotations

import asyncio
import codecs
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import hiredis
from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection, ConnectionPool

from ._compat import stream_writer
from .topology import RedisClient

Arg = str | int | float | bytes
KEEP_FROM = 64
"""A pool that lends fewer connections than this keeps all of them (see the module doc)."""
KEPT = 2
"""Connections the wire keeps out of the pool between round trips at most (module doc)."""
DIRECT_SEND = sys.version_info < (3, 12)
"""Whether ``send`` writes to a connection's stream itself (see ``send``)."""


class Wire:
    """Packs commands with hiredis and runs them in one round trip on a pooled connection."""

    __slots__ = ("_encoding", "_keep", "_kept", "_pool")

    def __init__(self, client: Redis, encoding: tuple[str, str]) -> None:
        pool = client.connection_pool
        self._pool = pool
        self._keep = keeps(pool)
        self._kept: list[AbstractConnection] = []
        """Connections of the last round trips, out of the pool until the next ones."""
        utf8 = codecs.lookup(encoding[0]).name == "utf-8" and encoding[1] == "strict"
        self._encoding = None if utf8 else encoding
        """None: hiredis's own str encoding (UTF-8, strict) is the client's."""

    @classmethod
    def of(cls, client: RedisClient, encoding: tuple[str, str]) -> Wire | None:
        """A wire for ``client``, or None where redis-py's command API must route the calls."""
        if not isinstance(client, Redis) or client.single_connection_client:
            return None
        return cls(client, encoding)

    def pack(self, args: Sequence[Arg]) -> bytes:
        """One command in RESP, its text in the client's encoding."""
        if self._encoding is not None:
            name, errors = self._encoding
            args = [arg.encode(name, errors) if isinstance(arg, str) else arg for arg in args]
        packed: bytes = hiredis.pack_command(tuple(args))  # type: ignore[arg-type]
        return packed

    async def round_trip(self, packed: Iterable[bytes], replies: int) -> list[Any]:
        """Send the parts of ``packed`` (``replies`` commands in all), each as soon as it is
        made; their replies, an error reply as its exception.

        ``packed`` may be a generator that packs a part when asked: Redis runs the first part
        while the next is packed (a bulk enqueue's packing overlaps the server's work on the
        batch before). A retry on a new connection sends the parts again.
        Raises the connection error once the connection's retry policy gives up.
        """
        made: list[bytes] = []
        source = iter(packed)

        def parts() -> Iterator[bytes]:
            yield from made
            for part in source:
                made.append(part)
                yield part

        connection = await self._connection()
        try:
            results: list[Any] = await connection.retry.call_with_retry(
                lambda: _exchange(connection, parts(), replies),
                lambda error: connection.disconnect(error=error),
            )
        except BaseException:
            await self._pool.release(connection)
            raise
        if self._keep and len(self._kept) < KEPT:
            self._kept.append(connection)
        else:
            await self._pool.release(connection)
        return results

    async def release(self) -> None:
        """Hand the kept connections back to the pool."""
        while self._kept:
            await self._pool.release(self._kept.pop())

    async def _connection(self) -> AbstractConnection:
        """The last kept connection if it is fit for a command (as the pool checks one), else
        one from the pool."""
        connection = self._kept.pop() if self._kept else None
        if connection is not None:
            try:
                if connection.is_connected and not await connection.can_read():
                    return connection
            except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError):
                pass
            await self._pool.release(connection)  # the pool reconnects it when lent again
        got: AbstractConnection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
        return got


def keeps(pool: ConnectionPool) -> bool:
    """Whether a connection of ``pool`` may be kept out of it between uses (see the module doc)."""
    return not isinstance(pool, BlockingConnectionPool) and (
        getattr(pool, "max_connections", 0) >= KEEP_FROM
    )


async def _exchange(
    connection: AbstractConnection, parts: Iterator[bytes], replies: int
) -> list[Any]:
    for part in parts:
        await send(connection, part)
    results: list[Any] = []
    for _ in range(replies):
        try:
            results.append(await connection.read_response())
        except redis_errors.ResponseError as exc:
            results.append(exc)
    return results


async def send(connection: AbstractConnection, data: bytes) -> None:
    """``connection.send_packed_command(data)``, without its task on Python 3.11.

    With a socket timeout (redis-py 8's default: 5 s) redis-py sends through
    ``asyncio.wait_for``, which on Python 3.11 runs the send in a task of its own: measured on
    an idle runner, 2.5 event-loop callbacks and ~65k instructions a round trip, the enqueue's
    and the claim's between an enqueue and its handler's start (callgrind: 738k instructions
    for that window without them, 875k with). So on 3.11 a connected connection without
    health checks is written to here, through its stream writer (redis-py's own attribute, not
    public API: ``_compat.stream_writer``), as redis-py writes without a socket timeout; the
    drain, which can wait only when the socket took less than all of the bytes, is bounded by
    the socket timeout as redis-py bounds the send, and a failed or cut-short send disconnects
    and raises as redis-py's does. Python 3.12's ``wait_for`` runs no task: there the send is
    redis-py's, as it is on a redis-py whose connections have no such attribute.
    """
    writer = stream_writer(connection) if DIRECT_SEND else None
    if writer is None or writer.transport.is_closing() or connection.health_check_interval:
        await connection.send_packed_command(data)
        return
    try:
        writer.write(data)
        if writer.transport.get_write_buffer_size():
            async with asyncio.timeout(connection.socket_timeout):
                await writer.drain()
    except TimeoutError:
        await connection.disconnect(nowait=True)
        raise redis_errors.TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        await connection.disconnect(nowait=True)
        raise redis_errors.ConnectionError(f"Error while writing to socket: {exc!r}") from exc
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
