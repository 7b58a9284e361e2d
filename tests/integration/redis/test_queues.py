"""Named queues on Redis beyond the conformance suite: where a job of a named queue sits (its
lane's zsets, in the queue's own space ``{ns|queue}``), what a record of the default queue holds
(no 'queue' field: records stored before named queues read as "default"), a workflow whose jobs
name different queues (refused: each queue is a slot of its own), the lease token naming the
lane. ``test_queue_slots`` shows the spaces on a Cluster's masters."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from jobs.errors import DriverError
from jobs.spi import WorkflowJob
from jobs.testing import new_request
from redis_jobs import (
    Keys,
    RedisJobDriver,
    ReplicationTimeoutError,
    delete_namespace,
    operations,
)
from redis_jobs.admin import list_namespaces

from .harness import RedisHarness, namespace_keys

pytestmark = pytest.mark.redis

LEASE_MS = 30_000


async def test_a_named_queues_job_sits_in_its_lane_and_a_default_one_as_before(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    keys = driver.keys.of_queue("emails")
    mailed = await driver.enqueue(new_request(queue="emails"))
    plain = await driver.enqueue(new_request())
    assert mailed is not None
    assert plain is not None
    assert await admin.zscore(keys.ready("t", "emails"), mailed) is not None
    home = driver.keys
    assert keys.prefix == "{" + driver.namespace + "|emails}:"
    assert await admin.zscore(home.ready("t", "emails"), mailed) is None
    assert await admin.zscore(home.ready("t"), mailed) is None
    assert await admin.zscore(home.ready("t"), plain) is not None
    assert keys.ready("t", "emails").endswith("|emails}:qready:emails/t")
    assert await admin.hget(keys.job(mailed), "queue") == b"emails"
    assert not await admin.exists(home.job(mailed))
    assert b"queue" not in await admin.hkeys(home.job(plain))
    assert await admin.smembers(keys.types + ":lanes") == {b"emails/t"}
    assert await admin.smembers(home.queues) == {b"emails"}
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


async def test_a_workflow_across_queues_is_refused_before_any_write(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    parent = new_request(queue="exports")
    child = new_request(queue="emails")
    with pytest.raises(DriverError, match="must all be in one queue on Redis"):
        await driver.enqueue_workflow(
            "wf", [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
        )
    assert sum((await driver.counts()).values()) == 0
    assert await admin.smembers(driver.keys.queues) == set()


async def test_a_workflow_in_one_named_queue_lives_in_its_space(harness: RedisHarness) -> None:
    driver = harness.redis_driver()
    parent = new_request(queue="emails")
    child = new_request(queue="emails")
    await driver.enqueue_workflow(
        "wf", [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
    )
    assert [job.id for job in await driver.workflow_jobs("wf")] == [parent.id, child.id]
    assert await driver.claim(5, LEASE_MS, ["t"]) == []
    [held] = await driver.claim(5, LEASE_MS, ["t"], "emails")
    assert held.id == parent.id
    assert await driver.complete(parent.id, held.lease_token)
    [released] = await driver.claim(5, LEASE_MS, ["t"], "emails")
    assert released.id == child.id
    info = await driver.get_job(child.id)
    assert info is not None
    assert info.queue == "emails"


async def test_a_namespace_holding_only_named_queues_is_listed_and_deleted_whole(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    namespace = driver.namespace
    assert await driver.enqueue(new_request(queue="emails")) is not None
    assert await driver.enqueue(new_request(queue="a:b")) is not None
    assert not await admin.exists(driver.keys.types)  # nothing in the default queue's space
    assert namespace in await list_namespaces(admin, limit=10_000)
    assert not any("|" in name for name in await list_namespaces(admin, limit=10_000))
    assert len(await namespace_keys(admin, namespace)) > 0
    assert await delete_namespace(admin, namespace) > 0
    assert await namespace_keys(admin, namespace) == []


@pytest.mark.parametrize("namespace", ["a|b", "{a}", "a}"])
def test_a_namespace_may_not_hold_the_queue_space_mark_or_braces(namespace: str) -> None:
    with pytest.raises(ValueError, match="may not contain"):
        Keys(namespace)


async def test_listing_counts_and_look_ups_span_the_queues_spaces(harness: RedisHarness) -> None:
    driver = harness.redis_driver()  # the harness clock: every job has one created_at
    ids = [
        await driver.enqueue(new_request(queue=queue, key=f"{queue}{n}"))
        for queue in ("default", "emails", "a:b")
        for n in range(5)
    ]
    pages, cursor = [], None
    while True:
        page = await driver.list_jobs(limit=4, cursor=cursor)
        pages.append([job.id for job in page.jobs])
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [len(page) for page in pages] == [4, 4, 4, 3]
    assert [job_id for page in pages for job_id in page] == sorted(ids, reverse=True)
    assert (await driver.counts())["pending"] == 15
    assert (await driver.stats())["t"].due == 15
    assert {q: row.due for q, row in (await driver.queue_stats()).items()} == {
        "default": 5,
        "emails": 5,
        "a:b": 5,
    }
    found = await driver.find_job("emails3")
    assert found is not None
    assert found.id == ids[8]
    assert await driver.find_job("nothing") is None
    assert await driver.cancel(ids[12])
    assert not await driver.cancel(ids[12])
    assert await driver.requeue(ids[12])
    assert await driver.delete(ids[13])
    assert await driver.get_job(ids[13]) is None
    assert await driver.purge(["pending"], older_than_ms=None) == 14
    assert sum((await driver.counts()).values()) == 0


async def test_a_wait_over_two_queues_ends_at_an_enqueue_into_either(
    harness: RedisHarness,
) -> None:
    driver = harness.redis_driver(clock=None)
    for queue in ("emails", "default"):
        waiting = asyncio.ensure_future(driver.wait_for_work(["t"], 5_000, ("default", "emails")))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        started = asyncio.get_running_loop().time()
        await driver.enqueue(new_request(queue=queue))
        await asyncio.wait_for(waiting, 2)
        assert asyncio.get_running_loop().time() - started < 2
        [held] = await driver.claim(1, LEASE_MS, ["t"], queue)
        assert await driver.complete(held.id, held.lease_token)


async def test_with_replicas_a_queue_unconfirmed_in_the_queues_set_stores_no_job(
    harness: RedisHarness, admin: Redis
) -> None:
    if (await admin.info("replication")).get("connected_slaves", 0):
        pytest.skip("the shared server has replicas: the WAIT would be confirmed")
    driver = RedisJobDriver(
        harness.client(), namespace=harness.namespace, replicas=1, replica_timeout_ms=50
    )
    try:
        with pytest.raises(ReplicationTimeoutError, match="queues set"):
            await driver.enqueue(new_request(queue="emails"))
        assert await admin.zcard(driver.keys.of_queue("emails").ready("t", "emails")) == 0
    finally:
        await driver.close()


async def stored(driver: RedisJobDriver, queue: str) -> str:
    job_id = await driver.enqueue(new_request(queue=queue))
    assert job_id is not None
    return job_id


async def lanes_of(admin: Redis, keys: Keys, queue: str) -> dict[str, set[str]]:
    """The members of a named queue's lane indexes of type "t" (see redis_jobs.keys)."""
    found = {}
    for what in ("live", "completed", "failed", "cancelled"):
        members = await admin.zrange(keys.lane(what, queue, "t"), 0, -1)
        found[what] = {member.decode() for member in members if isinstance(member, bytes)}
    return found


async def test_a_named_queues_job_moves_through_its_lanes_indexes_and_a_default_one_has_none(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(retain_completed_ms=60_000)
    keys = driver.keys.of_queue("emails")  # the queue's space holds its lanes
    live = {await stored(driver, "emails") for _ in range(4)}
    await stored(driver, "default")
    assert await lanes_of(admin, keys, "emails") == {
        "live": live, "completed": set(), "failed": set(), "cancelled": set(),
    }  # fmt: skip
    held = await driver.claim(3, LEASE_MS, ["t"], "emails")
    done, failed, requeued = (job.id for job in held)
    [cancelled] = live - {done, failed, requeued}
    assert await driver.complete(done, held[0].lease_token)
    assert await driver.fail(failed, held[1].lease_token, error="E: x")
    assert await driver.fail(requeued, held[2].lease_token, error="E: x")
    assert await driver.cancel(cancelled)
    assert await driver.requeue(requeued)
    assert await lanes_of(admin, keys, "emails") == {
        "live": {requeued}, "completed": {done}, "failed": {failed}, "cancelled": {cancelled},
    }  # fmt: skip
    info = await driver.get_job(done)
    assert info is not None
    assert info.created_at is not None
    created_ms = round(info.created_at.timestamp() * 1000)
    assert await admin.zscore(keys.lane("completed", "emails", "t"), done) == created_ms
    home = driver.keys.pattern
    assert not [key async for key in admin.scan_iter(match=home) if b":lane:" in key]
    assert await driver.delete(failed)
    harness.clock.advance(60_001)  # done's retention ends; the next completion prunes it
    [again] = await driver.claim(1, LEASE_MS, ["t"], "emails")
    assert await driver.complete(again.id, again.lease_token)
    assert await lanes_of(admin, keys, "emails") == {
        "live": set(), "completed": {requeued}, "failed": set(), "cancelled": {cancelled},
    }  # fmt: skip
    assert await driver.purge(["completed", "cancelled"]) == 2
    assert await lanes_of(admin, keys, "emails") == {
        "live": set(), "completed": set(), "failed": set(), "cancelled": set(),
    }  # fmt: skip


async def test_a_stall_failed_by_a_claim_and_a_workflow_cancel_keep_the_lanes_indexes(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    keys = driver.keys.of_queue("exports")  # a workflow's jobs are in one queue's space
    parent = new_request(queue="exports", max_attempts=1, max_stalls=0)
    child = new_request(queue="exports", payload={"child": True})
    await driver.enqueue_workflow(
        "wf", [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
    )
    assert (await lanes_of(admin, keys, "exports"))["live"] == {parent.id, child.id}
    assert [job.id for job in await driver.claim(5, LEASE_MS, ["t"], "exports")] == [parent.id]
    harness.clock.advance(LEASE_MS)
    assert await driver.claim(5, LEASE_MS, ["t"], "exports") == []  # fails it: stalled
    exports = await lanes_of(admin, keys, "exports")
    assert (exports["live"], exports["failed"]) == (set(), {parent.id})
    assert exports["cancelled"] == {child.id}
    stats = await driver.queue_stats()
    assert (stats["exports"].failed, stats["exports"].cancelled) == (1, 1)


async def test_default_queue_counts_are_the_types_less_its_named_lanes(
    harness: RedisHarness,
) -> None:
    """Jobs stored before named queues (no lane index) count, and list, as "default"."""
    driver = harness.redis_driver()
    ids = []
    for queue in ("default", "emails", "default"):
        job_id = await stored(driver, queue)
        [held] = await driver.claim(1, LEASE_MS, ["t"], queue)
        assert await driver.complete(held.id, held.lease_token)
        ids.append(job_id)
    stats = await driver.queue_stats()
    assert (stats["default"].completed, stats["emails"].completed) == (2, 1)
    listed = await driver.list_jobs(queue="default", state="completed", limit=1)
    rest = await driver.list_jobs(queue="default", state="completed", cursor=listed.next_cursor)
    assert sorted(job.id for job in listed.jobs + rest.jobs) == sorted([ids[0], ids[2]])


async def test_a_lane_index_of_another_type_refuses_a_settle_before_any_write(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    keys = driver.keys.of_queue("emails")
    job_id = await stored(driver, "emails")
    [held] = await driver.claim(1, LEASE_MS, ["t"], "emails")
    await admin.set(keys.lane("completed", "emails", "t"), "not a zset")
    with pytest.raises(Exception, match="expected a zset"):
        await driver.complete(job_id, held.lease_token)
    info = await driver.get_job(job_id)
    assert info is not None
    assert info.state == "active"
    await admin.delete(keys.lane("completed", "emails", "t"))
    assert await driver.complete(job_id, held.lease_token)


async def test_a_default_page_among_many_named_jobs_of_its_type_is_read_in_several_calls(
    harness: RedisHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default queue has no lane index: its page of a type shared with a named queue skips
    the named jobs, at most a bounded number a script call (list.lua's SCAN), and the driver
    calls again from where one stopped until the page is full (at most LIST_CALLS calls: then
    it answers short, with the cursor of where it stopped). Since each named queue has a slot of
    its own, named jobs are in the default queue's space only when stored there before (here: by
    a driver that keeps every queue in the namespace's space, as drivers did then)."""
    driver = harness.redis_driver()
    legacy = harness.redis_driver()
    legacy._spaces = None  # every queue in {ns}, as stored before queues had slots
    older = await stored(driver, "default")
    for _ in range(3):
        harness.clock.advance(1)
        crowd = [new_request(queue="emails") for _ in range(500)]
        assert None not in await legacy.enqueue_many(crowd)
    harness.clock.advance(1)
    newer = await stored(driver, "default")
    page = await driver.list_jobs(queue="default", limit=5)
    assert ([job.id for job in page.jobs], page.next_cursor) == ([newer, older], None)
    first = await driver.list_jobs(queue="default", limit=1)
    assert [job.id for job in first.jobs] == [newer]
    rest = await driver.list_jobs(queue="default", limit=1, cursor=first.next_cursor)
    assert ([job.id for job in rest.jobs], rest.next_cursor) == ([older], None)
    emails = await legacy.list_jobs(queue="emails", state="pending", limit=1_000)
    assert len(emails.jobs) == 1_000
    assert emails.next_cursor is not None
    monkeypatch.setattr(operations, "LIST_CALLS", 1)  # a page then answers after one call
    short = await driver.list_jobs(queue="default", limit=5)
    assert [job.id for job in short.jobs] == [newer]
    listed, cursor = [newer], short.next_cursor
    while cursor is not None:  # each page goes on from where the one before stopped
        page = await driver.list_jobs(queue="default", limit=5, cursor=cursor)
        listed += [job.id for job in page.jobs]
        cursor = page.next_cursor
    assert listed == [newer, older]


async def test_a_default_page_reads_no_named_job_once_queues_have_slots(
    harness: RedisHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = harness.redis_driver()
    older = await stored(driver, "default")
    crowd = [new_request(queue="emails") for _ in range(500)]
    assert None not in await driver.enqueue_many(crowd)
    harness.clock.advance(1)
    newer = await stored(driver, "default")
    monkeypatch.setattr(operations, "LIST_CALLS", 1)  # one call: the page is still full
    page = await driver.list_jobs(queue="default", limit=5)
    assert ([job.id for job in page.jobs], page.next_cursor) == ([newer, older], None)
