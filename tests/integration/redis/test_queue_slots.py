"""Each named queue in a hash slot of its own (issue 30, item 2), on the private 3-master
Cluster: two queues whose tags hash to slots of two different masters hold their keys there,
and enqueue, claim, settle, listing, stats and a runner's wait work across them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import RedisCluster
from redis.crc import key_slot

from jobs.errors import DriverError
from jobs.handlers import JobHandlerRegistry
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import WorkflowJob
from jobs.testing import new_request
from redis_jobs import Keys, RedisJobDriver, delete_namespace
from tests.support import wait_until

from .topologies import PrivateCluster

pytestmark = pytest.mark.cluster

LEASE_MS = 30_000


def slot_of(namespace: str, queue: str = "default") -> int:
    return key_slot(Keys(namespace, queue).prefix.encode())


def queues_on_two_masters(cluster: PrivateCluster, namespace: str) -> tuple[str, str]:
    """Two queue names whose spaces are served by two different masters, neither the
    namespace's own (so three masters hold the namespace's three spaces)."""
    home = cluster.master_of(slot_of(namespace))
    found: dict[int, str] = {}
    for number in range(1_000):
        name = f"q{number}"
        master = cluster.master_of(slot_of(namespace, name))
        if master != home:
            found.setdefault(master, name)
        if len(found) == 2:
            first, second = found.values()
            return first, second
    raise AssertionError("no two queues on two masters other than the namespace's")


@pytest.fixture
async def namespace(cluster: PrivateCluster) -> AsyncIterator[str]:
    name = f"slots-{uuid.uuid4().hex[:8]}"
    yield name
    client = RedisCluster.from_url(cluster.url)
    try:
        await delete_namespace(client, name)
    finally:
        await client.aclose()


@pytest.fixture
async def driver(cluster: PrivateCluster, namespace: str) -> AsyncIterator[RedisJobDriver]:
    client = RedisCluster.from_url(cluster.url)
    driver = RedisJobDriver(client, namespace=namespace)
    yield driver
    await driver.close()
    await client.aclose()


def keys_on(cluster: PrivateCluster, port: int, pattern: str) -> list[str]:
    return list(cluster.node(port).ask("KEYS", pattern))


async def test_two_queues_keep_their_keys_on_two_masters_and_work_across_them(
    cluster: PrivateCluster, namespace: str, driver: RedisJobDriver
) -> None:
    first, second = queues_on_two_masters(cluster, namespace)
    masters = {
        queue: cluster.master_of(slot_of(namespace, queue)) for queue in ("default", first, second)
    }
    assert len(set(masters.values())) == 3
    ids = {
        queue: [
            await driver.enqueue(new_request(queue=queue, key=f"{queue}-{n}")) for n in range(3)
        ]
        for queue in (first, second, "default")
    }

    for queue, master in masters.items():
        slot = slot_of(namespace, queue)
        assert int(cluster.node(master).ask("CLUSTER", "COUNTKEYSINSLOT", slot)) > 0
        pattern = Keys(namespace, queue).pattern
        for port in set(masters.values()):
            held = keys_on(cluster, port, pattern)
            assert bool(held) == (port == master), (queue, port, held)
        records = [Keys(namespace, queue).job(job_id or "") for job_id in ids[queue]]
        assert set(records) <= set(keys_on(cluster, master, pattern))
    admin = RedisCluster.from_url(cluster.url)
    try:  # the namespace's queues set names the spaces in use
        assert await admin.smembers(Keys(namespace).queues) == {first.encode(), second.encode()}
    finally:
        await admin.aclose()

    counts = await driver.counts()
    assert counts["pending"] == 9
    by_queue = await driver.queue_stats()
    assert {queue: row.due for queue, row in by_queue.items()} == {
        "default": 3,
        first: 3,
        second: 3,
    }
    assert (await driver.stats())["t"].due == 9

    listed: list[str] = []
    cursor = None
    while True:
        page = await driver.list_jobs(limit=4, cursor=cursor)
        listed += [job.id for job in page.jobs]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(listed) == sorted(job_id for batch in ids.values() for job_id in batch if job_id)
    assert len(listed) == 9
    only = await driver.list_jobs(queue=second)
    assert sorted(job.id for job in only.jobs) == sorted(i for i in ids[second] if i)

    found = await driver.find_job(f"{second}-1")
    assert found is not None
    assert (found.id, found.queue) == (ids[second][1], second)
    assert await driver.enqueue(new_request(queue=second, key=f"{second}-1")) is None

    held_first = await driver.claim(10, LEASE_MS, ["t"], first)
    held_second = await driver.claim(10, LEASE_MS, ["t"], second)
    assert sorted(job.id for job in held_first) == sorted(i for i in ids[first] if i)
    assert sorted(job.id for job in held_second) == sorted(i for i in ids[second] if i)
    assert await driver.heartbeat(held_first[0].id, held_first[0].lease_token, LEASE_MS)
    assert await driver.complete(held_first[0].id, held_first[0].lease_token)
    assert await driver.fail(held_second[0].id, held_second[0].lease_token, error="boom")
    assert await driver.retry(
        held_second[1].id, held_second[1].lease_token, delay_ms=0, error="again"
    )
    done = await driver.complete_many(
        [(job.id, job.lease_token) for job in (held_first[1], held_second[2])]
    )
    assert done == [True, True]
    assert await driver.release_many([(held_first[2].id, held_first[2].lease_token)]) == [True]

    states = {
        job_id: (await driver.get_job(job_id))
        for job_id in (held_first[0].id, held_second[0].id, held_second[1].id)
    }
    assert [info.state if info else None for info in states.values()] == [
        "completed",
        "failed",
        "pending",
    ]
    counts = await driver.counts()
    assert (counts["completed"], counts["failed"], counts["pending"]) == (3, 1, 5)
    assert await driver.requeue(held_second[0].id)
    assert await driver.cancel(held_second[0].id)
    assert not await driver.cancel("no-such-job")
    failed = await driver.list_jobs(state="cancelled")
    assert [job.id for job in failed.jobs] == [held_second[0].id]


async def test_a_runner_serving_two_queues_on_two_masters_wakes_for_either(
    cluster: PrivateCluster, namespace: str, driver: RedisJobDriver
) -> None:
    first, second = queues_on_two_masters(cluster, namespace)
    ran: list[str] = []

    async def record(payload: Any) -> None:
        ran.append(payload["id"])

    registry = JobHandlerRegistry()
    registry.register("t", record)
    settings = JobsSettings(
        concurrency=2, lease_ms=LEASE_MS, heartbeat_ms=1_000, poll_interval_ms=30_000
    )
    runner = JobRunner(driver, registry, settings, queues=f"{first},{second}")
    runner.start()
    try:
        await asyncio.sleep(0.3)  # idle: blocked in both spaces' waits
        for queue in (second, first):
            started = time.monotonic()
            await driver.enqueue(new_request(queue=queue, payload={"id": queue}))
            await wait_until(lambda q=queue: q in ran, timeout=5, message=f"{queue} ran")
            assert time.monotonic() - started < 5  # woken, not polled (30 s)
    finally:
        await runner.close()
    assert sorted(ran) == sorted([first, second])
    assert all(row.active == 0 for row in (await driver.queue_stats()).values())


async def test_a_workflow_spanning_queues_is_refused_on_redis_naming_the_fix(
    cluster: PrivateCluster, namespace: str, driver: RedisJobDriver
) -> None:
    first, second = queues_on_two_masters(cluster, namespace)
    parent = new_request(queue=first)
    child = new_request(queue=second)
    with pytest.raises(DriverError, match="one queue"):
        await driver.enqueue_workflow(
            "wf", [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
        )
    assert sum((await driver.counts()).values()) == 0
    same = new_request(queue=first)
    await driver.enqueue_workflow(
        "wf2", [WorkflowJob(request=parent), WorkflowJob(request=same, depends_on=(parent.id,))]
    )
    jobs = await driver.workflow_jobs("wf2")
    assert [job.id for job in jobs] == [parent.id, same.id]
    [held] = await driver.claim(5, LEASE_MS, ["t"], first)
    assert held.id == parent.id
    assert await driver.complete(parent.id, held.lease_token)
    [released] = await driver.claim(5, LEASE_MS, ["t"], first)
    assert released.id == same.id


async def test_with_replicas_named_queues_are_confirmed_on_their_masters_replicas(
    cluster: PrivateCluster, namespace: str
) -> None:
    first, second = queues_on_two_masters(cluster, namespace)
    client = RedisCluster.from_url(cluster.url)
    driver = RedisJobDriver(client, namespace=namespace, replicas=1)
    try:
        ids = [await driver.enqueue(new_request(queue=queue)) for queue in (first, second)]
        for job_id, queue in zip(ids, (first, second), strict=True):
            info = await driver.get_job(job_id or "")
            assert info is not None
            assert info.queue == queue
            [held] = await driver.claim(1, LEASE_MS, ["t"], queue)
            assert await driver.complete(held.id, held.lease_token)
    finally:
        await driver.close()
        await client.aclose()
