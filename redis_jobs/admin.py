"""Operations on a whole namespace, outside the job transitions."""

from __future__ import annotations

from redis.asyncio import RedisCluster

from .keys import SPACE_MARK, Keys
from .topology import RedisClient

DELETE_CHUNK = 1_000
MAX_SCANNED_FOR_NAMESPACES = 100_000
"""``list_namespaces`` stops after this many keys scanned: a hint, never a long walk."""
SCAN_COUNT = 1_000
NAMESPACE_PATTERN = "{*}:types"


async def delete_namespace(client: RedisClient, namespace: str) -> int:
    """Delete every key of ``namespace`` (and no other), its named queues' spaces included;
    how many were deleted.

    For tests, demos and retiring a namespace: run it when no driver uses the namespace, or
    keys written meanwhile stay. Keys are found with SCAN on the namespace's escaped pattern,
    so Redis is never blocked by a KEYS call (on a Cluster, SCAN runs on every master), and
    deleted in chunks (one slot: each chunk is one DEL on the slot's master). On a Cluster the
    client's map of masters is read anew first: after a failover it may still list the demoted
    master, whose pooled connections the server closed.
    """
    if isinstance(client, RedisCluster):
        await client.nodes_manager.initialize()
    keys = [key async for key in client.scan_iter(match=Keys(namespace).namespace_pattern)]
    deleted = 0
    for start in range(0, len(keys), DELETE_CHUNK):
        # a Cluster client splits a chunk by slot (each queue's space is a slot of its own)
        deleted += await client.delete(*keys[start : start + DELETE_CHUNK])
    return deleted


async def list_namespaces(client: RedisClient, limit: int = 50) -> list[str]:
    """The namespaces with a ``{ns}:types`` set (every namespace a job was enqueued in; a named
    queue's space, ``{ns|queue}:types``, names its namespace), sorted;
    at most ``limit``. A hint, so bounded: a plain server is scanned for at most
    ``MAX_SCANNED_FOR_NAMESPACES`` keys (a Cluster's masters by ``scan_iter``)."""
    found: set[str] = set()

    def add(key: bytes | str) -> None:
        text = key.decode() if isinstance(key, bytes) else key
        name = text[1 : -len("}:types")]
        # not a type's key that happens to end so ({ns}:ready:x}:types); {ns|queue}: ns
        if text.startswith("{") and text.endswith("}:types") and "}" not in name:
            found.add(name.partition(SPACE_MARK)[0])

    if isinstance(client, RedisCluster):
        await client.nodes_manager.initialize()
        async for key in client.scan_iter(match=NAMESPACE_PATTERN, count=SCAN_COUNT):
            add(key)
            if len(found) >= limit:
                break
        return sorted(found)[:limit]
    cursor, scanned = 0, 0
    while True:
        cursor, keys = await client.scan(cursor, match=NAMESPACE_PATTERN, count=SCAN_COUNT)
        for key in keys:
            add(key)
        scanned += SCAN_COUNT
        if not cursor or len(found) >= limit or scanned >= MAX_SCANNED_FOR_NAMESPACES:
            return sorted(found)[:limit]
