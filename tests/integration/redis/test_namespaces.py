"""S31/S32: namespaces are isolated, escaped in SCAN patterns and kept in one Cluster slot."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from jobs.testing import new_request
from redis_jobs import Keys, RedisJobDriver, delete_namespace
from redis_jobs.keys import escape_glob

from .harness import RedisHarness, namespace_keys, snapshot

pytestmark = pytest.mark.redis

LEASE_MS = 30_000


async def fill(driver: RedisJobDriver, jobs: int) -> set[str]:
    """Jobs in every state, with keys: pending, active, completed, failed, retried."""
    ids = await asyncio.gather(
        *(driver.enqueue(new_request(payload={"n": n}, key=f"k{n}")) for n in range(jobs))
    )
    claimed = await driver.claim(4, LEASE_MS, ["t"])
    assert await driver.complete(claimed[0].id, claimed[0].lease_token)
    assert await driver.fail(claimed[1].id, claimed[1].lease_token, error="no")
    assert await driver.retry(claimed[2].id, claimed[2].lease_token, delay_ms=0, error="again")
    return {job_id for job_id in ids if job_id is not None}


async def test_work_on_one_namespace_leaves_the_others_byte_identical(
    harness: RedisHarness, admin: Redis
) -> None:
    base = uuid.uuid4().hex
    names = [f"{base}:app", f"{base}:app:x", f"{base}:app*", f"{base}:app[1]"]
    drivers = {name: harness.redis_driver(namespace=name) for name in names}
    unrelated = [f"{base}:app".encode(), f"{base}:1234".encode(), f"{base}:app}}x".encode()]
    try:
        for key in unrelated:
            await admin.set(key, "not a job")
        ids = {name: await fill(driver, 100) for name, driver in drivers.items()}
        others = list(unrelated)
        for name in names[1:]:
            others += await namespace_keys(admin, name)
        before = await snapshot(admin, others)

        app = drivers[names[0]]
        harness.clock.advance(LEASE_MS)  # the active job's lease expires: a reclaim is due
        claimed: list[str] = []
        while batch := await app.claim(25, LEASE_MS, ["t"]):
            claimed += [job.id for job in batch]
            for job in batch:
                assert await app.complete(job.id, job.lease_token)
        assert set(claimed) <= ids[names[0]]
        assert len(claimed) == 100 - 2  # all but the completed and the failed one
        assert (await app.counts())["completed"] == 99
        await delete_namespace(admin, names[0])

        assert await namespace_keys(admin, names[0]) == []
        assert await snapshot(admin, others) == before
        for name in names[1:]:
            assert (await drivers[name].counts())["pending"] == 100 - 3
    finally:
        await admin.delete(*unrelated)


def test_scan_patterns_escape_glob_characters() -> None:
    assert escape_glob("a*b?c[1]\\") == "a\\*b\\?c\\[1\\]\\\\"
    assert Keys("app*").pattern == "{app\\*}:*"
    assert Keys("app[1]").pattern == "{app\\[1\\]}:*"


@pytest.mark.parametrize("name", ["", "{tag}", "a}b", "a{b", "x" * 201])
def test_namespaces_that_would_move_the_hash_tag_are_rejected(name: str) -> None:
    with pytest.raises(ValueError):
        RedisJobDriver(Redis(), namespace=name)


async def test_every_key_of_a_namespace_carries_its_hash_tag(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(namespace=f"tagged:{uuid.uuid4().hex}")
    await fill(driver, 10)
    await driver.enqueue(new_request("other type", key="{tag}"))
    await driver.enqueue(new_request(delay_ms=10 * LEASE_MS))
    await driver.wait_for_work(["t"], 1)
    harness.clock.advance(LEASE_MS)
    await driver.claim(10, LEASE_MS, ["t", "other type"])

    keys = await namespace_keys(admin, driver.namespace)
    prefix = ("{" + driver.namespace + "}:").encode()
    kinds = {key[len(prefix) :].split(b":")[0] for key in keys}
    expected = {
        *(b"job", b"ready", b"leased", b"signal", b"key", b"completed", b"failed"),
        *(b"state", b"types"),
    }
    assert kinds == expected
    assert all(key.startswith(prefix) for key in keys)
    assert {key_slot(key) for key in keys} == {key_slot(prefix)}
