"""S17: a script that meets a wrong-typed key or a malformed record refuses before any write.

Redis does not roll back a script that fails part-way, so every script checks first and writes
last. Each case arranges a bad key behind the driver's back, snapshots every key of the
namespace (DUMP: type and content byte for byte, plus whether it has a TTL), makes the calls,
and expects RedisScriptError with the snapshot unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest
from redis.asyncio import Redis

from jobs.errors import DriverError
from jobs.spi import JobRequest
from jobs.testing import new_request
from redis_jobs import RedisJobDriver, RedisScriptError

from .harness import RedisHarness, namespace_snapshot

pytestmark = pytest.mark.redis

LEASE_MS = 30_000

Call = Callable[[], Awaitable[object]]


async def assert_refused_without_writes(
    admin: Redis, driver: RedisJobDriver, calls: dict[str, Call]
) -> None:
    before = await namespace_snapshot(admin, driver.namespace)
    assert before, "the case should have keys to protect"
    for name, call in calls.items():
        with pytest.raises(RedisScriptError):
            await call()
        after = await namespace_snapshot(admin, driver.namespace)
        assert after == before, f"{name} wrote before refusing"


async def test_a_record_key_of_the_wrong_type_is_refused(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    job_id = await driver.enqueue(new_request(key="k"))
    assert job_id is not None
    await admin.delete(driver.keys.job(job_id))
    await admin.set(driver.keys.job(job_id), "not a hash")
    token = "1:feed:t"
    await assert_refused_without_writes(
        admin,
        driver,
        {
            "heartbeat": lambda: driver.heartbeat(job_id, token, LEASE_MS),
            "complete": lambda: driver.complete(job_id, token),
            "retry": lambda: driver.retry(job_id, token, delay_ms=0, error="e"),
            "fail": lambda: driver.fail(job_id, token, error="e"),
            "get_job": lambda: driver.get_job(job_id),
            "enqueue, same id": lambda: driver.enqueue(
                JobRequest(id=job_id, type="t", payload="null", max_attempts=3)
            ),
            "enqueue, same key": lambda: driver.enqueue(new_request(key="k")),
        },
    )
    # A claim cannot lease it: the listing is dropped (the key, not a job, is left alone) and
    # the other jobs are claimed as usual.
    healthy = await driver.enqueue(new_request())
    assert [job.id for job in await driver.claim(10, LEASE_MS, ["t"])] == [healthy]
    assert await admin.zscore(driver.keys.ready("t"), job_id) is None
    assert await admin.get(driver.keys.job(job_id)) == b"not a hash"


async def test_a_record_missing_a_field_is_refused_by_every_transition(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    job_id = await driver.enqueue(new_request())
    assert job_id is not None
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    await admin.hdel(driver.keys.job(job_id), "attempts")
    await assert_refused_without_writes(
        admin,
        driver,
        {
            "heartbeat": lambda: driver.heartbeat(job_id, job.lease_token, LEASE_MS),
            "complete": lambda: driver.complete(job_id, job.lease_token),
            "retry": lambda: driver.retry(job_id, job.lease_token, delay_ms=0, error="e"),
            "fail": lambda: driver.fail(job_id, job.lease_token, error="e"),
        },
    )
    harness.clock.advance(LEASE_MS)
    # The reclaim fails it alone, the missing field written back plain so it reads again.
    assert await driver.claim(10, LEASE_MS, ["t"]) == []
    info = await driver.get_job(job_id)
    assert info is not None
    assert (info.state, info.attempts) == ("failed", 0)
    assert info.last_error is not None
    assert info.last_error.startswith("malformed job record: ")
    assert "no attempts field" in info.last_error
    assert await admin.zscore(driver.keys.failed, job_id) is not None


async def test_a_pending_record_missing_its_payload_fails_alone(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    healthy = await driver.enqueue(new_request(run_at_ms=harness.clock.now_ms() - 1))
    broken = await driver.enqueue(new_request(run_at_ms=harness.clock.now_ms() - 2))
    assert healthy is not None
    assert broken is not None
    await admin.hdel(driver.keys.job(broken), "payload")
    assert [job.id for job in await driver.claim(10, LEASE_MS, ["t"])] == [healthy]
    info = await driver.get_job(broken)
    assert info is not None
    assert (info.state, info.payload) == ("failed", None)
    assert info.last_error == (
        f"malformed job record: job record {driver.keys.job(broken)} has no payload field"
    )
    listed = {job.id: job.state for job in (await driver.list_jobs()).jobs}
    assert listed == {healthy: "active", broken: "failed"}


@pytest.mark.parametrize("shared", ["pending index", "completed", "failed"])
async def test_a_shared_key_of_the_wrong_type_is_refused(
    harness: RedisHarness, admin: Redis, shared: str
) -> None:
    driver = harness.redis_driver()
    job_id = await driver.enqueue(new_request())
    assert job_id is not None
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    key = (
        driver.keys.state("pending") if shared == "pending index" else getattr(driver.keys, shared)
    )
    await admin.delete(key)
    await admin.rpush(key, "not", "a", "set")
    calls: dict[str, Call] = {"counts": driver.counts}
    if shared == "pending index":
        calls["enqueue"] = lambda: driver.enqueue(new_request())
        calls["retry"] = lambda: driver.retry(job_id, job.lease_token, delay_ms=0, error="e")
    elif shared == "completed":
        calls["complete"] = lambda: driver.complete(job_id, job.lease_token)
    else:
        calls["claim"] = lambda: driver.claim(10, LEASE_MS, ["t"])
        calls["fail"] = lambda: driver.fail(job_id, job.lease_token, error="e")
    await assert_refused_without_writes(admin, driver, calls)


@pytest.mark.parametrize("kind", ["ready", "leased", "signal"])
async def test_a_per_type_key_of_the_wrong_type_is_refused(
    harness: RedisHarness, admin: Redis, kind: str
) -> None:
    driver = harness.redis_driver()
    job_id = await driver.enqueue(new_request())
    assert job_id is not None
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    key = getattr(driver.keys, kind)("t")
    await admin.delete(key)
    await admin.hset(key, "not", "a zset or list")
    calls: dict[str, Call] = {
        "retry": lambda: driver.retry(job_id, job.lease_token, delay_ms=0, error="e"),
    }
    if kind != "leased":
        calls["enqueue"] = lambda: driver.enqueue(new_request())
    if kind != "signal":
        calls["claim"] = lambda: driver.claim(10, LEASE_MS, ["t"])
    if kind == "leased":
        calls["heartbeat"] = lambda: driver.heartbeat(job_id, job.lease_token, LEASE_MS)
        calls["complete"] = lambda: driver.complete(job_id, job.lease_token)
        calls["fail"] = lambda: driver.fail(job_id, job.lease_token, error="e")
    await assert_refused_without_writes(admin, driver, calls)


async def test_a_key_index_of_the_wrong_type_is_refused(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    await admin.hset(driver.keys.index("k"), "not", "a string")
    await driver.enqueue(new_request())  # the namespace has keys of its own to protect
    await assert_refused_without_writes(
        admin, driver, {"enqueue": lambda: driver.enqueue(new_request(key="k"))}
    )


async def test_replacing_an_expired_holder_checks_the_finished_sets_first(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(retain_completed_ms=1_000)
    job_id = await driver.enqueue(new_request(key="k"))
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.complete(job.id, job.lease_token)
    harness.clock.advance(1_000)
    await admin.delete(driver.keys.failed)
    await admin.rpush(driver.keys.failed, "not a zset")
    await assert_refused_without_writes(
        admin, driver, {"enqueue": lambda: driver.enqueue(new_request(key="k"))}
    )
    assert job_id is not None
    assert await admin.exists(driver.keys.job(job_id))


async def test_a_batch_refuses_the_jobs_of_a_type_whose_key_is_wrong_and_stores_the_rest(
    harness: RedisHarness, admin: Redis
) -> None:
    # The enqueue function checks a type's keys once a call: a type that passed (a) lets its
    # later jobs by, one that was refused (b) is checked, and refused, again for each job.
    driver = harness.redis_driver()
    await admin.hset(driver.keys.ready("b"), "not", "a zset")
    requests = [new_request(job_type) for job_type in ("a", "b", "a", "b", "a")]
    with pytest.raises(RedisScriptError):
        await driver.enqueue_many(requests)
    for request in requests:
        info = await driver.get_job(request.id)
        assert (info is not None) == (request.type == "a")
    assert await admin.zcard(driver.keys.ready("a")) == 3
    assert await admin.hgetall(driver.keys.ready("b")) == {b"not": b"a zset"}
    assert (await driver.counts())["pending"] == 3


async def test_a_batch_naming_one_id_twice_stores_the_first_and_checks_the_second_against_it(
    harness: RedisHarness,
) -> None:
    # A batch of new jobs reads no job's record (one EXISTS of them all), but one naming a
    # record an earlier job of the same call stored: the retry of the same job is stored
    # once, another job under its id is refused (-1), and neither overwrites the first.
    driver = harness.redis_driver()
    first = new_request(payload={"n": 1})
    retry = replace(first)
    between = new_request()
    assert await driver.enqueue_many([first, between, retry]) == [first.id, between.id, first.id]
    second = new_request(payload={"n": 1})
    taken = replace(second, payload='{"n": 2}')
    with pytest.raises(DriverError, match="already exists"):
        await driver.enqueue_many([second, taken])
    info = await driver.get_job(second.id)
    assert info is not None
    assert info.payload == {"n": 1}
    assert (await driver.counts())["pending"] == 3
