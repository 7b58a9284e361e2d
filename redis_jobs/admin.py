"""Operations on a whole namespace, outside the job transitions."""

from __future__ import annotations

from .keys import Keys
from .topology import RedisClient

DELETE_CHUNK = 1_000


async def delete_namespace(client: RedisClient, namespace: str) -> int:
    """Delete every key of ``namespace`` (and no other); how many were deleted.

    For tests, demos and retiring a namespace: run it when no driver uses the namespace, or
    keys written meanwhile stay. Keys are found with SCAN on the namespace's escaped pattern,
    so Redis is never blocked by a KEYS call (on a Cluster, SCAN runs on every master), and
    deleted in chunks (one slot: each chunk is one DEL on the slot's master).
    """
    keys = [key async for key in client.scan_iter(match=Keys(namespace).pattern)]
    deleted = 0
    for start in range(0, len(keys), DELETE_CHUNK):
        deleted += await client.delete(*keys[start : start + DELETE_CHUNK])
    return deleted
