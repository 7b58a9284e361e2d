"""Named queues on Redis beyond the conformance suite: where a job of a named queue sits (its
lane's zsets), what a record of the default queue holds (no 'queue' field: records stored
before named queues read as "default"), a workflow whose jobs name different queues (every key
in the namespace's one slot: allowed, each job released into its own queue), the lease token
naming the lane."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from jobs.spi import WorkflowJob
from jobs.testing import new_request

from .harness import RedisHarness

pytestmark = pytest.mark.redis

LEASE_MS = 30_000


async def test_a_named_queues_job_sits_in_its_lane_and_a_default_one_as_before(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    keys = driver.keys
    mailed = await driver.enqueue(new_request(queue="emails"))
    plain = await driver.enqueue(new_request())
    assert mailed is not None
    assert plain is not None
    assert await admin.zscore(keys.ready("t", "emails"), mailed) is not None
    assert await admin.zscore(keys.ready("t"), mailed) is None
    assert await admin.zscore(keys.ready("t"), plain) is not None
    assert keys.ready("t", "emails").endswith(":qready:emails/t")
    assert await admin.hget(keys.job(mailed), "queue") == b"emails"
    assert b"queue" not in await admin.hkeys(keys.job(plain))
    assert await admin.smembers(keys.types + ":lanes") == {b"emails/t"}
    [held] = await driver.claim(5, LEASE_MS, ["t"], "emails")
    assert await admin.zscore(keys.leased("t", "emails"), mailed) is not None
    assert await driver.heartbeat(mailed, held.lease_token, LEASE_MS)
    assert await driver.complete(mailed, held.lease_token)
    assert await admin.zcard(keys.leased("t", "emails")) == 0


async def test_a_token_of_one_queue_does_not_settle_the_job_in_another(
    harness: RedisHarness,
) -> None:
    driver = harness.redis_driver()
    job_id = await driver.enqueue(new_request(queue="a:b"))
    assert job_id is not None
    [held] = await driver.claim(1, LEASE_MS, ["t"], "a:b")
    forged = held.lease_token.replace("~", "~00", 1)  # names another lane: stale
    assert not await driver.complete(job_id, forged)
    assert await driver.complete(job_id, held.lease_token)


async def test_a_workflow_across_queues_releases_each_job_into_its_own_queue(
    harness: RedisHarness,
) -> None:
    driver = harness.redis_driver()
    parent = new_request(queue="exports")
    child = new_request(queue="emails")
    await driver.enqueue_workflow(
        "wf", [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
    )
    assert await driver.claim(5, LEASE_MS, ["t"], "emails") == []
    [held] = await driver.claim(5, LEASE_MS, ["t"], "exports")
    assert held.id == parent.id
    assert await driver.complete(parent.id, held.lease_token)
    assert await driver.claim(5, LEASE_MS, ["t"], "exports") == []
    assert await driver.claim(5, LEASE_MS, ["t"]) == []
    [released] = await driver.claim(5, LEASE_MS, ["t"], "emails")
    assert released.id == child.id
    info = await driver.get_job(child.id)
    assert info is not None
    assert info.queue == "emails"
