"""Redis test support: a harness per test namespace that deletes every key it made.

Tests talk to the Redis server at ``TEST_REDIS_URL`` (default 127.0.0.1:6379) and fail, not
skip, when it is absent. They never FLUSHALL/FLUSHDB: each uses its own random namespace and
deletes that namespace's keys (SCAN MATCH on the escaped pattern) at teardown.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis, RedisCluster

from jobs.clock import Clock, ManualClock
from redis_jobs import Keys, RedisJobDriver, delete_namespace
from redis_jobs.topology import RedisClient
from tests.stores import REDIS_URL

Connect = Callable[..., RedisClient]
"""Makes a client: ``connect(client_name=...)``; by default one of the shared server."""


def shared_server(**options: Any) -> Redis:
    return Redis.from_url(REDIS_URL, **options)


def cluster_at(url: str) -> Connect:
    """A Connect for the Redis Cluster one of whose nodes is at ``url``."""

    def connect(**options: Any) -> RedisCluster:
        return RedisCluster.from_url(url, **options)

    return connect


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unique_namespace(label: str = "test") -> str:
    return f"{label}-{uuid.uuid4().hex}"


async def namespace_keys(client: Redis, namespace: str) -> list[bytes]:
    pattern = Keys(namespace).namespace_pattern  # its queues' spaces included
    return sorted([key async for key in client.scan_iter(match=pattern)])


Snapshot = dict[bytes, tuple[bytes | None, bool]]


async def snapshot(client: Redis, keys: list[bytes]) -> Snapshot:
    """Each key's DUMP (its type and content, byte for byte) and whether it has a TTL."""
    return {key: (await client.dump(key), await client.pttl(key) > 0) for key in keys}


async def namespace_snapshot(client: Redis, namespace: str) -> Snapshot:
    return await snapshot(client, await namespace_keys(client, namespace))


async def blocked_in_blpop(client: Redis, name: str) -> int:
    """How many connections named ``name`` are blocked in BLPOP right now."""
    return sum(
        1
        for entry in await client.client_list()
        if entry.get("name") == name and entry.get("cmd") == "blpop"
    )


class RedisHarness:
    """Drivers on one fresh namespace, each on its own client; cleans up at ``cleanup()``."""

    keys_per_queue = True
    """Each queue is a hash slot of its own (``redis_jobs.spaces``): a key is unique per queue."""
    workflows_in_one_queue = True
    """A workflow is stored by one script, in one slot: its jobs are all in one queue."""
    type_limits_per_queue = True
    """A claim's limit keys are in its queue's slot: a type's fleet limit counts per queue."""

    def __init__(self, namespace: str | None = None, *, connect: Connect = shared_server) -> None:
        self.connect = connect
        self.clock = ManualClock()
        self.namespace = namespace or unique_namespace()
        self.namespaces = {self.namespace}
        self._clients: list[RedisClient] = []
        self._drivers: list[RedisJobDriver] = []

    def client(self, name: str | None = None) -> RedisClient:
        """A new client (named ``name`` on the server, when given); closed at cleanup."""
        client = self.connect(client_name=name)
        self._clients.append(client)
        return client

    async def driver(
        self, *, retain_completed_ms: int | None = None, retain_failed_ms: int | None = None
    ) -> RedisJobDriver:
        return self.redis_driver(
            retain_completed_ms=retain_completed_ms, retain_failed_ms=retain_failed_ms
        )

    def redis_driver(
        self,
        *,
        namespace: str | None = None,
        client: RedisClient | None = None,
        clock: Clock | bool | None = True,
        retain_completed_ms: int | None = None,
        retain_failed_ms: int | None = None,
    ) -> RedisJobDriver:
        """A driver on a new client; ``clock=True`` is the harness clock, None Redis TIME."""
        namespace = namespace or self.namespace
        self.namespaces.add(namespace)
        driver = RedisJobDriver(
            client or self.client(),
            namespace=namespace,
            clock=self.clock if clock is True else (clock or None),
            retain_completed_ms=retain_completed_ms,
            retain_failed_ms=retain_failed_ms,
        )
        self._drivers.append(driver)
        return driver

    async def corrupt(self, job_id: str) -> str:
        """Make the stored job malformed behind the driver's back (the conformance hook): a
        NaN timeout, which a Lua number holds and cjson cannot encode. The field's name."""
        admin = self.connect()
        try:
            await admin.hset(Keys(self.namespace).job(job_id), "timeout_ms", "nan")
        finally:
            await admin.aclose()
        return "timeout_ms"

    async def cleanup(self) -> None:
        for driver in self._drivers:
            await driver.close()
        admin = self.connect()
        try:
            for namespace in self.namespaces:
                await delete_namespace(admin, namespace)
        finally:
            await admin.aclose()
            for client in self._clients:
                await client.aclose()
