"""The driver on a private Redis Cluster: namespaces on different masters, a failover mid-run.

One 3-master cluster (a replica each) is started for the module. A namespace's keys share one
hash tag, so one slot and one master; names are picked so that two namespaces land on two
different masters.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.crc import key_slot

from jobs.testing import new_request
from redis_jobs import Keys, RedisJobDriver, delete_namespace
from redis_jobs.library import LIBRARY
from tests.support import captured_logs, wait_until

from .failover import Load
from .topologies import PrivateCluster, Process, wait_for

pytestmark = pytest.mark.cluster

JOBS = 300


@pytest.fixture
async def client(cluster: PrivateCluster) -> AsyncIterator[RedisCluster]:
    client = RedisCluster.from_url(cluster.url)
    yield client
    await client.aclose()


def slot_of(namespace: str) -> int:
    return key_slot(Keys(namespace).prefix.encode())


def namespaces_on_distinct_masters(cluster: PrivateCluster, count: int) -> list[str]:
    found: dict[int, str] = {}
    while len(found) < count:
        name = f"cluster-{uuid.uuid4().hex[:8]}"
        found.setdefault(cluster.master_of(slot_of(name)), name)
    return list(found.values())


async def test_a_master_without_the_function_library_is_given_it_on_first_use(
    cluster: PrivateCluster, client: RedisCluster
) -> None:
    [name] = namespaces_on_distinct_masters(cluster, 1)
    driver = RedisJobDriver(client, namespace=name)
    master = cluster.node(cluster.master_of(slot_of(name)))
    try:
        assert await driver.enqueue(new_request()) is not None
        # As on a node that was given the slot by a resharding, or added after the library
        # was loaded everywhere: the namespace's master has no library.
        master.ask("FUNCTION", "FLUSH")
        assert master.ask("FUNCTION", "LIST") == []
        assert await driver.enqueue(new_request()) is not None
        assert LIBRARY.name in str(master.ask("FUNCTION", "LIST", "LIBRARYNAME", LIBRARY.name))
        jobs = await driver.claim(10, 30_000, ["t"])
        assert len(jobs) == 2
        assert await driver.complete_many([(job.id, job.lease_token) for job in jobs]) == [
            True,
            True,
        ]
    finally:
        await driver.close()
        await delete_namespace(client, name)


async def test_two_namespaces_on_two_masters_are_drained_by_a_runner_each(
    cluster: PrivateCluster, client: RedisCluster
) -> None:
    names = namespaces_on_distinct_masters(cluster, 2)
    loads = [Load(RedisJobDriver(client, namespace=name)) for name in names]
    try:
        for load in loads:
            load.runner.start()
        await asyncio.gather(*(load.produce(range(JOBS), 0) for load in loads))
        await asyncio.gather(*(load.all_ran() for load in loads))
        for load in loads:
            load.check(range(JOBS))
            assert sum(load.runs.values()) == JOBS  # no fault: each exactly once
        for name in names:  # each namespace's keys live on its own master only
            master = cluster.node(cluster.master_of(slot_of(name)))
            assert master.ask("CLUSTER", "COUNTKEYSINSLOT", str(slot_of(name))) > 0
    finally:
        for load in loads:
            await load.runner.close()
            await load.driver.close()
        for name in names:
            await delete_namespace(client, name)


async def test_delete_namespace_removes_only_that_namespace(client: RedisCluster) -> None:
    kept, dropped = f"kept-{uuid.uuid4().hex}", f"dropped-{uuid.uuid4().hex}"
    drivers = [RedisJobDriver(client, namespace=name) for name in (kept, dropped)]
    try:
        for driver in drivers:
            for _ in range(5):
                await driver.enqueue(new_request())
        assert await delete_namespace(client, dropped) > 0
        assert [key async for key in client.scan_iter(match=Keys(dropped).pattern)] == []
        assert (await drivers[0].counts())["pending"] == 5
    finally:
        for driver in drivers:
            await driver.close()
        await delete_namespace(client, kept)


async def test_a_cluster_failover_mid_run_loses_no_acknowledged_job(
    cluster: PrivateCluster, client: RedisCluster
) -> None:
    """CLUSTER FAILOVER on the namespace's replica while jobs flow, with ``replicas=1``."""
    namespace = f"failover-{uuid.uuid4().hex[:8]}"
    load = Load(RedisJobDriver(client, namespace=namespace, replicas=1))
    with captured_logs("WARNING") as logs:
        try:
            load.runner.start()
            producing = asyncio.create_task(load.produce(range(JOBS), 0.005))
            await wait_until(
                lambda: len(load.acknowledged) >= JOBS // 3, message="a third acknowledged"
            )
            old, new = await asyncio.to_thread(cluster.failover, slot_of(namespace))
            await producing
            await load.all_ran()
        finally:
            await load.runner.close()
            await load.driver.close()
            await delete_namespace(client, namespace)
    load.check(range(JOBS))
    print(f"refusals {load.refusals}, runs {sum(load.runs.values())}, ids {len(load.runs)}")
    [line] = [r["message"] for r in logs if r["message"].startswith("Redis failover:")]
    assert f"is now served by 127.0.0.1:{new} (was 127.0.0.1:{old})" in line
    assert namespace in line


def wait_calls(node: Process) -> int:
    """WAIT commands ``node`` has run (INFO commandstats)."""
    stats = node.info("commandstats").get("cmdstat_wait", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


async def test_a_durable_write_moved_by_a_failover_is_confirmed_by_its_new_master(
    cluster: PrivateCluster, client: RedisCluster
) -> None:
    """The client still maps the slot to the old master, now a replica: the FCALL is MOVED.

    The WAIT goes with the write to the node that ran it, not to the old one (where it would
    fail, "WAIT cannot be used with replica instances", and the write be reported unconfirmed).
    """
    [name] = namespaces_on_distinct_masters(cluster, 1)
    driver = RedisJobDriver(client, namespace=name, replicas=1)
    try:
        assert await driver.enqueue(new_request()) is not None  # the client learns the map
        old, new = await asyncio.to_thread(cluster.failover, slot_of(name))
        await asyncio.to_thread(wait_for, cluster.healthy, "the old master to follow the new")
        assert client.get_node_from_key(Keys(name).prefix).port == old  # a stale map
        waits_before = wait_calls(cluster.node(new))
        with captured_logs("WARNING") as logs:
            job_id = await driver.enqueue(new_request())
        assert job_id is not None
        assert wait_calls(cluster.node(new)) == waits_before + 1
        assert (await driver.counts())["pending"] == 2
        [line] = [r["message"] for r in logs if r["message"].startswith("Redis failover:")]
        assert f"is now served by 127.0.0.1:{new} (was 127.0.0.1:{old})" in line
    finally:
        await driver.close()
        await delete_namespace(client, name)


async def test_a_plain_client_on_a_cluster_node_is_told_to_use_a_cluster_client(
    cluster: PrivateCluster,
) -> None:
    names = namespaces_on_distinct_masters(cluster, 3)
    first = cluster.nodes[0].port
    elsewhere = next(name for name in names if cluster.master_of(slot_of(name)) != first)
    plain = Redis(port=first)
    driver = RedisJobDriver(plain, namespace=elsewhere)
    try:
        with pytest.raises(Exception, match="RedisCluster") as raised:
            await driver.enqueue(new_request())
        assert "redis+cluster://" in str(raised.value)
    finally:
        await driver.close()
        await plain.aclose()
