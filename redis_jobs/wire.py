"""One round trip of pre-packed commands through a pooled connection of a ``redis.asyncio.Redis``.

The driver's calls are FCALLs of 10 to 3,000 arguments. ``Redis.execute_command`` and
``Pipeline.execute`` pack each argument in Python (redis-py's asyncio packer) and wrap the
exchange in per-command bookkeeping; measured on an enqueue (28 arguments) that cost ~50 us of
client CPU on top of the ~110 us of a bare redis-py script call, and ~30 us per job of a bulk
enqueue. Here a command is packed once by hiredis (``hiredis.pack_command``, the C packer
redis-py's own sync client uses) and the round trip goes through redis-py's public connection
API, as ``Pipeline.execute`` does it: a connection from the client's pool (Sentinel: one
connected to the primary it discovered), ``send_packed_command`` and one ``read_response``
per command (error replies parsed to redis-py's exceptions), under the
connection's retry policy, released to the pool afterwards.

Only a plain pooled ``Redis`` (also a Sentinel ``master_for`` client) goes this way; a
``RedisCluster`` (routing, MOVED/ASK) and a single-connection client keep redis-py's command
API (``Wire.of`` returns None for them).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import hiredis
from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from .topology import RedisClient

Arg = str | int | float | bytes


class Wire:
    """Packs commands with hiredis and runs them in one round trip on a pooled connection."""

    __slots__ = ("_encoding", "_pool")

    def __init__(self, client: Redis, encoding: tuple[str, str]) -> None:
        self._pool = client.connection_pool
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

        pool = self._pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            results: list[Any] = await connection.retry.call_with_retry(
                lambda: _exchange(connection, parts(), replies),
                lambda error: connection.disconnect(error=error),
            )
            return results
        finally:
            await pool.release(connection)


async def _exchange(
    connection: AbstractConnection, parts: Iterator[bytes], replies: int
) -> list[Any]:
    for part in parts:
        await connection.send_packed_command(part)
    results: list[Any] = []
    for _ in range(replies):
        try:
            results.append(await connection.read_response())
        except redis_errors.ResponseError as exc:
            results.append(exc)
    return results
