"""The driver behind Sentinel, and ``replicas=``: private primary, replica and sentinel per test."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.asyncio.sentinel import Sentinel

from jobs.errors import StoreUnavailableError
from jobs.spi import WorkflowJob
from jobs.testing import new_request
from redis_jobs import RedisJobDriver, RedisReplicaError, ReplicationTimeoutError
from redis_jobs.topology import client_from_url
from tests.support import captured_logs, wait_until

from .failover import Load
from .redis_server import RedisServers
from .topologies import SERVICE, PrivateSentinel

pytestmark = pytest.mark.cluster

JOBS = 300


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSentinel]:
    """One group for the tests that leave its roles alone."""
    started = PrivateSentinel(tmp_path_factory.mktemp("sentinel"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def fresh_group(tmp_path: Path) -> Iterator[PrivateSentinel]:
    """A group of the test's own, for a test that fails it over."""
    started = PrivateSentinel(tmp_path)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[RedisServers]:
    started = RedisServers(tmp_path)
    try:
        yield started
    finally:
        await started.stop_all()


def namespace() -> str:
    return f"sentinel-{uuid.uuid4().hex[:8]}"


@pytest.mark.slow
async def test_a_sentinel_failover_mid_run_loses_no_acknowledged_job(
    fresh_group: PrivateSentinel,
) -> None:
    group = fresh_group
    load = Load(
        RedisJobDriver(url=group.url, namespace=namespace(), replicas=1, replica_timeout_ms=500)
    )
    with captured_logs("WARNING") as logs:
        try:
            load.runner.start()
            producing = asyncio.create_task(load.produce(range(JOBS), 0.005))
            await wait_until(
                lambda: len(load.acknowledged) >= JOBS // 3, message="a third acknowledged"
            )
            old, new = await asyncio.to_thread(group.failover)
            await producing
            await load.all_ran()
        finally:
            await load.runner.close()
            await load.driver.close()
    load.check(range(JOBS))
    [line] = [r["message"] for r in logs if r["message"].startswith("Redis failover:")]
    assert f"is now served by 127.0.0.1:{new} (was 127.0.0.1:{old})" in line


@pytest.mark.slow
async def test_a_borrowed_master_for_client_is_followed_too(fresh_group: PrivateSentinel) -> None:
    group = fresh_group
    sentinel = Sentinel(group.sentinels)  # type: ignore[no-untyped-call]
    client = sentinel.master_for(SERVICE)
    driver = RedisJobDriver(client, namespace=namespace(), replicas=1)
    try:
        first = await driver.enqueue(new_request())
        await asyncio.to_thread(group.failover)

        async def enqueued() -> bool:
            try:
                return await driver.enqueue(new_request()) is not None
            except StoreUnavailableError:
                return False

        await wait_until(enqueued, timeout=20, interval=0.05, message="an enqueue after failover")
        assert first is not None
        assert await driver.get_job(first) is not None  # confirmed by WAIT: it survived
    finally:
        await driver.close()
        await client.aclose()
        for sentinel_client in sentinel.sentinels:
            await sentinel_client.aclose()


async def test_an_acknowledged_enqueue_is_on_the_replica(group: PrivateSentinel) -> None:
    driver = RedisJobDriver(url=group.url, namespace=namespace(), replicas=1)
    replica = Redis(port=group.replica.port)
    try:
        for _ in range(20):
            job_id = await driver.enqueue(new_request())
            assert job_id is not None
            # WAIT returned: the replica has the record already, no waiting needed
            assert await replica.exists(driver.keys.job(job_id)) == 1
    finally:
        await driver.close()
        await replica.aclose()


async def test_an_acknowledged_workflow_and_its_release_are_on_the_replica(
    group: PrivateSentinel,
) -> None:
    driver = RedisJobDriver(url=group.url, namespace=namespace(), replicas=1)
    replica = Redis(port=group.replica.port)
    parents = [new_request(), new_request()]
    callback = new_request()
    jobs = [WorkflowJob(request=parent) for parent in parents]
    jobs.append(WorkflowJob(request=callback, depends_on=tuple(p.id for p in parents)))
    try:
        await driver.enqueue_workflow("wf", jobs)
        # WAIT returned: the replica has the whole workflow, the callback in no ready zset
        assert await replica.exists(*(driver.keys.job(job.request.id) for job in jobs)) == 3
        assert await replica.hget(driver.keys.workflow("wf"), "open") == b"3"
        assert await replica.zscore(driver.keys.ready("t"), callback.id) is None
        claimed = await driver.claim(10, 30_000, ["t"])
        assert {job.id for job in claimed} == {parent.id for parent in parents}
        assert await driver.complete_many([(job.id, job.lease_token) for job in claimed]) == [
            True,
            True,
        ]
        assert await replica.zscore(driver.keys.ready("t"), callback.id) is not None
    finally:
        await driver.close()
        await replica.aclose()


async def test_a_new_drivers_first_write_is_confirmed_where_the_library_is_loaded(
    group: PrivateSentinel,
) -> None:
    """A driver's first call on a primary that has the function library already (a second
    worker, a restart) is a durable write: the primary was not known before it (the client
    had not connected) and known after, which is no failover."""
    first = RedisJobDriver(url=group.url, namespace=namespace(), replicas=1)
    try:
        assert await first.enqueue(new_request()) is not None  # loads the library
    finally:
        await first.close()
    for _ in range(2):
        driver = RedisJobDriver(url=group.url, namespace=namespace(), replicas=1)
        try:
            assert await driver.enqueue(new_request()) is not None
        finally:
            await driver.close()


async def test_a_driver_on_a_replica_says_it_is_one(group: PrivateSentinel) -> None:
    driver = RedisJobDriver(url=f"redis://127.0.0.1:{group.replica.port}/0", namespace="r")
    try:
        with pytest.raises(RedisReplicaError, match="read-only replica") as raised:
            await driver.enqueue(new_request())
        assert "primary" in str(raised.value)
        assert isinstance(raised.value, StoreUnavailableError)
    finally:
        await driver.close()


async def test_a_write_no_replica_confirms_raises_in_time(servers: RedisServers) -> None:
    server = await servers.start()  # a lone server: no replica can confirm anything
    driver = RedisJobDriver(url=server.url, namespace="lone", replicas=1, replica_timeout_ms=100)
    try:
        started = time.monotonic()
        with pytest.raises(ReplicationTimeoutError, match="0 of 1 replicas") as raised:
            await driver.enqueue(new_request())
        assert time.monotonic() - started < 2
        assert isinstance(raised.value, StoreUnavailableError)
        assert "may not survive a failover" in str(raised.value)
        claimed = await driver.claim(1, 1_000, ["t"])  # stored on the primary; claims don't WAIT
        assert len(claimed) == 1
        with pytest.raises(ReplicationTimeoutError):
            await driver.complete(claimed[0].id, claimed[0].lease_token)
    finally:
        await driver.close()


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://127.0.0.1:1",
        "redis+sentinel:///service",
        "redis+sentinel://host/service",
        "redis+sentinel://127.0.0.1:1/service/db",
        "redis+sentinel://127.0.0.1:1/a/1/b",
    ],
)
def test_a_malformed_sentinel_url_is_refused_with_its_shape(url: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        client_from_url(url)


def test_bad_replica_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="replicas"):
        RedisJobDriver(url="redis://127.0.0.1:1/0", replicas=-1)
    with pytest.raises(ValueError, match="replica_timeout_ms"):
        RedisJobDriver(url="redis://127.0.0.1:1/0", replicas=1, replica_timeout_ms=0)
