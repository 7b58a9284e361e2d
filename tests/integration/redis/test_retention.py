"""Finished jobs: kept by the script clock, expired by PEXPIRE, absent from ready/lease sets."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from jobs.spi import stalled_error
from jobs.testing import new_request
from redis_jobs.driver import EXPIRY_MARGIN_MS

from .harness import RedisHarness

pytestmark = pytest.mark.redis

LEASE_MS = 30_000
RETAIN_MS = 60_000


async def test_a_completed_record_and_its_key_expire(harness: RedisHarness, admin: Redis) -> None:
    driver = harness.redis_driver(retain_completed_ms=RETAIN_MS)
    keys = driver.keys
    job_id = await driver.enqueue(new_request(key="k"))
    assert job_id is not None
    assert await admin.pttl(keys.job(job_id)) == -1
    assert await admin.pttl(keys.index("k")) == -1
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await admin.pttl(keys.job(job_id)) == -1
    assert await driver.complete(job_id, job.lease_token)

    for key in (keys.job(job_id), keys.index("k"), keys.completed):
        assert RETAIN_MS < await admin.pttl(key) <= RETAIN_MS + EXPIRY_MARGIN_MS
    assert await admin.zscore(keys.ready("t"), job_id) is None
    assert await admin.zscore(keys.leased("t"), job_id) is None
    assert await admin.zscore(keys.completed, job_id) is not None
    assert not await admin.hexists(keys.job(job_id), "token")
    assert not await admin.hexists(keys.job(job_id), "lease_until")


async def test_keep_until_sets_the_expiry(harness: RedisHarness, admin: Redis) -> None:
    driver = harness.redis_driver(retain_completed_ms=1_000)
    keep_ms = 3_600_000
    job_id = await driver.enqueue(
        new_request(key="nightly", keep_until_ms=harness.clock.now_ms() + keep_ms)
    )
    assert job_id is not None
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.complete(job_id, job.lease_token)
    for key in (driver.keys.job(job_id), driver.keys.index("nightly")):
        assert keep_ms < await admin.pttl(key) <= keep_ms + EXPIRY_MARGIN_MS


async def test_a_stalled_failure_expires_too(harness: RedisHarness, admin: Redis) -> None:
    driver = harness.redis_driver(retain_failed_ms=RETAIN_MS)
    job_id = await driver.enqueue(new_request(max_attempts=1, max_stalls=0))
    assert job_id is not None
    await driver.claim(1, LEASE_MS, ["t"])
    harness.clock.advance(LEASE_MS)
    assert await driver.claim(1, LEASE_MS, ["t"]) == []
    info = await driver.get_job(job_id)
    assert info is not None
    assert (info.state, info.last_error) == ("failed", stalled_error(1, 0))
    assert RETAIN_MS < await admin.pttl(driver.keys.job(job_id)) <= RETAIN_MS + EXPIRY_MARGIN_MS
    assert await admin.zscore(driver.keys.leased("t"), job_id) is None
    assert await admin.zscore(driver.keys.failed, job_id) is not None


async def test_an_expired_holder_is_replaced_and_pruned(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(retain_completed_ms=RETAIN_MS)
    keys = driver.keys
    old = await driver.enqueue(new_request(key="k"))
    other = await driver.enqueue(new_request())
    assert old is not None
    assert other is not None
    for job in await driver.claim(2, LEASE_MS, ["t"]):
        if job.id == old:
            assert await driver.complete(job.id, job.lease_token)
    harness.clock.advance(RETAIN_MS)
    assert (await driver.counts())["completed"] == 0

    new = await driver.enqueue(new_request(key="k"))
    assert new is not None
    assert not await admin.exists(keys.job(old))
    assert await admin.zscore(keys.completed, old) is None
    assert await admin.get(keys.index("k")) == new.encode()


async def test_finished_entries_are_pruned_by_later_finishes(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(retain_completed_ms=RETAIN_MS)
    first = await driver.enqueue(new_request())
    assert first is not None
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.complete(first, job.lease_token)
    harness.clock.advance(RETAIN_MS)
    second = await driver.enqueue(new_request())
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.complete(job.id, job.lease_token)
    assert await admin.zrange(driver.keys.completed, 0, -1) == [(second or "").encode()]


@pytest.mark.parametrize("state", ["completed", "failed", "cancelled"])
async def test_a_job_past_retention_leaves_the_state_indexes_and_stats(
    harness: RedisHarness, admin: Redis, state: str
) -> None:
    driver = harness.redis_driver(retain_completed_ms=RETAIN_MS, retain_failed_ms=RETAIN_MS)
    keys = driver.keys

    async def finish_one(job_type: str) -> str:
        job_id = await driver.enqueue(new_request(job_type))
        assert job_id is not None
        if state == "cancelled":
            assert await driver.cancel(job_id)
            return job_id
        [job] = await driver.claim(1, LEASE_MS, [job_type])
        if state == "completed":
            assert await driver.complete(job.id, job.lease_token)
        else:
            assert await driver.fail(job.id, job.lease_token, error="e")
        return job_id

    old = [await finish_one("a"), await finish_one("b")]
    harness.clock.advance(RETAIN_MS)
    for job_id in old:  # their records expire (PEXPIRE, real time)
        await admin.delete(keys.job(job_id))
    new = await finish_one("a")

    for index in (keys.state(state), keys.state(state, "a"), keys.state(state, "b")):
        assert not {job_id.encode() for job_id in old} & set(await admin.zrange(index, 0, -1))
    assert await admin.zrange(keys.state(state), 0, -1) == [new.encode()]
    stats = await driver.stats()
    assert (getattr(stats["a"], state), getattr(stats.get("b"), state, 0)) == (1, 0)
    page = await driver.list_jobs(state=state)  # type: ignore[arg-type]
    assert [info.id for info in page.jobs] == [new]


async def test_a_heartbeat_for_a_missing_job_creates_no_key(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    assert await driver.heartbeat("missing", "1:abc:t", LEASE_MS) is False
    assert await driver.complete("missing", "1:abc:t") is False
    assert await driver.retry("missing", "1:abc:t", delay_ms=0, error="e") is False
    assert await driver.fail("missing", "1:abc:t", error="e") is False
    assert [key async for key in admin.scan_iter(match=driver.keys.pattern)] == []


async def test_a_job_whose_record_vanished_is_dropped_by_claim(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    gone = await driver.enqueue(new_request(run_at_ms=harness.clock.now_ms() - 1))
    kept = await driver.enqueue(new_request())
    assert gone is not None
    await admin.delete(driver.keys.job(gone))  # as an eviction or a careless DEL would
    assert [job.id for job in await driver.claim(10, LEASE_MS, ["t"])] == [kept]
    assert await admin.zscore(driver.keys.ready("t"), gone) is None
    assert await driver.counts() == {
        "pending": 0,
        "active": 1,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
    }
