"""The driver's blocking waits: BLPOP on a connection it keeps for them, from the topology.

Why not ``client.blpop``: through the client every wait checks a connection out of the pool
(on a Cluster: routes to the slot's node) and back, and it had to run in a task of its own
raced by ``asyncio.wait`` so that a stop could cancel it again (below). Measured on an idle
runner between an enqueue and its handler's start, that cost 2 event-loop callbacks and ~80k
instructions (callgrind: 974k for the whole window through the client, 895k here).

Here the BLPOP is sent with ``send_command`` and its reply read with ``read_response`` (redis-py's
connection API) on a connection held for waits: one of the client's pool (Sentinel: connected to
the primary it discovered, rediscovered on reconnect), or on a Cluster one of the node that
serves the namespace's slot (the namespace is one slot, ``keys``); a BLPOP redirected (the slot
moved in a failover or a resharding) ends as a wake-up, and the runner's next calls, through
the client, follow the redirect and teach it the new master. After a wait it is kept for
the next one, as the script wire keeps its own (``wire.keeps``: not from a pool that lends only
a few); a kept one is checked before use as the pool would (pending data or a closed socket:
reconnected), and on a Cluster taken anew when the slot's master changed. Concurrent waits take
more connections the same way. A wait that ends by an error or a cancel drops its connection
(disconnects it), so a half-read reply is never read as another's.

Cancellation: on Python 3.11 redis-py sends through ``asyncio.wait_for``, which drops a
cancellation that arrives as the send completes (python/cpython#86296); a reconnect's handshake
sends several times. A cancel requested of the waiting task since its wait began (``cancels``,
``Task.cancelling()``) that no one raised is raised after the send, before the read, so
``runner.stop()`` is not left waiting out the BLPOP. ``close`` disconnects the connections of
the waits in flight, which ends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from redis import exceptions as redis_errors
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import AbstractConnection, Connection, ConnectionPool

from .errors import translate
from .topology import Topology
from .wire import keeps

_REDIRECTS = (redis_errors.AskError, redis_errors.TryAgainError)
"""A Cluster's replies to a BLPOP that ran nothing where it was sent (MovedError is an AskError)."""
BLOCK_SHARE_OF_SOCKET_TIMEOUT = 0.8
"""A BLPOP blocks at most this share of its connection's socket timeout (the read's timeout)."""


@dataclass(slots=True)
class _Held:
    """A connection held for waits and where it goes back to."""

    connection: AbstractConnection
    owner: ConnectionPool | ClusterNode
    keep: bool
    """Whether it is kept between waits (``wire.keeps``; a Cluster node's always)."""


class Waiter:
    """BLPOPs for ``topology``'s client on connections held for waits."""

    __slots__ = ("_busy", "_closed", "_kept", "_topology")

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._kept: _Held | None = None
        self._busy: set[AbstractConnection] = set()
        self._closed = False

    async def wait(self, signals: Sequence[str], seconds: float, cancels: int) -> None:
        """BLPOP ``signals`` for up to ``seconds`` (capped below the socket timeout).

        ``cancels``: the waiting task's ``cancelling()`` when its wait began (see the module
        docstring). Raises the translated error of a failed wait, unless ``close`` ended it.
        """
        try:
            held = await self._take()
        except Exception as exc:
            raise translate(exc) from exc
        connection = held.connection
        timeout = connection.socket_timeout
        if timeout:
            seconds = min(seconds, timeout * BLOCK_SHARE_OF_SOCKET_TIMEOUT)
        command = ("BLPOP", *signals, round(max(seconds, 0.001), 3))
        self._busy.add(connection)
        healthy = False
        try:
            await connection.retry.call_with_retry(
                lambda: _exchange(connection, command, cancels),
                lambda error: connection.disconnect(error=error),
            )
            healthy = True
        except _REDIRECTS:
            pass  # the slot moved: a wake-up, and the next wait goes to its new master
        except Exception as exc:
            if not self._closed:
                raise translate(exc) from exc
        finally:
            self._busy.discard(connection)
            if not healthy:
                await connection.disconnect(nowait=True)
            await self._give_back(held)

    async def close(self) -> None:
        """End the waits in flight; hand the kept connection back (before the client closes)."""
        self._closed = True
        for connection in list(self._busy):
            await connection.disconnect(nowait=True)  # its BLPOP's read ends here
        held, self._kept = self._kept, None
        if held is not None:
            await _release(held)

    async def _take(self) -> _Held:
        held, self._kept = self._kept, None
        if held is not None:
            if await self._fit(held):
                return held
            await _release(held)
        client = self._topology.client
        if isinstance(client, RedisCluster):
            node = await self._topology.slot_node()
            return _Held(node.acquire_connection(), node, keep=True)
        pool = client.connection_pool
        connection: AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]
        return _Held(connection, pool, keep=keeps(pool))

    async def _fit(self, held: _Held) -> bool:
        """Whether the kept connection may carry the next wait (a dirty one is disconnected,
        and reconnects when sent to)."""
        if isinstance(held.owner, ClusterNode) and held.owner is not self._topology.known_node():
            return False
        connection = held.connection
        try:
            if connection.is_connected and await connection.can_read():
                await connection.disconnect(nowait=True)
        except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError):
            await connection.disconnect(nowait=True)
        return True

    async def _give_back(self, held: _Held) -> None:
        if self._closed or self._kept is not None or not held.keep:
            await _release(held)
        else:
            self._kept = held


async def _exchange(
    connection: AbstractConnection, command: tuple[object, ...], cancels: int
) -> None:
    await connection.send_command(*command)
    if cancel_requests() > cancels:
        raise asyncio.CancelledError  # dropped by the send (see the module docstring)
    await connection.read_response()


def cancel_requests() -> int:
    """How many cancellations of the current task are pending (``Task.cancelling()``)."""
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


async def _release(held: _Held) -> None:
    owner = held.owner
    if isinstance(owner, ClusterNode):
        owner.release(cast(Connection, held.connection))  # a node lends only Connections
    else:
        await owner.release(held.connection)
