"""Operations on a whole namespace, outside the job transitions."""

from __future__ import annotations

from redis.asyncio import RedisCluster

from .keys import Keys
from .topology import RedisClient

DELETE_CHUNK = 1_000


async def delete_namespace(client: RedisClient, namespace: str) -> int:
    """Delete every key of ``namespace`` (and no other); how many were deleted.

    For tests, demos and retiring a namespace: run it when no driver uses the namespace, or
    keys written meanwhile stay. Keys are found with SCAN on the namespace's escaped pattern,
    so Redis is never blocked by a KEYS call (on a Cluster, SCAN runs on every master), and
    deleted in chunks (one slot: each chunk is one DEL on the slot's master). On a Cluster the
    client's map of masters is read anew first: after a failover it may still list the demoted
    master, whose pooled connections the server closed.
    """
    if isinstance(client, RedisCluster):
        await client.nodes_manager.initialize()
    keys = [key async for key in client.scan_iter(match=Keys(namespace).pattern)]
    deleted = 0
    for start in range(0, len(keys), DELETE_CHUNK):
        deleted += await client.delete(*keys[start : start + DELETE_CHUNK])
    return deleted
