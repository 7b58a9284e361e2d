"""Workflows on Redis beyond the conformance suite: what the keys hold and when they go, the
stalled parent failed by a claim, the script's own checks (all or nothing), a plain job's
record untouched by any of it."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from redis.asyncio import Redis

from jobs.spi import JobRequest, WorkflowJob, stalled_error, workflow_cancelled_error
from jobs.testing import new_request
from redis_jobs import RedisJobDriver, RedisScriptError
from redis_jobs.driver import EXPIRY_MARGIN_MS

from .harness import RedisHarness, namespace_keys, namespace_snapshot, snapshot

pytestmark = pytest.mark.redis

LEASE_MS = 30_000
RETAIN_MS = 60_000
WORKFLOW_FIELDS = (b"workflow", b"depends_on", b"waiting", b"dependents")


def step(
    request: JobRequest, *parents: JobRequest, continue_after: tuple[JobRequest, ...] = ()
) -> WorkflowJob:
    return WorkflowJob(
        request=request,
        depends_on=tuple(parent.id for parent in parents),
        continue_after=tuple(parent.id for parent in continue_after),
    )


async def workflow_keys(admin: Redis, driver: RedisJobDriver) -> list[bytes]:
    prefix = driver.keys.workflow("").encode()
    return [key for key in await namespace_keys(admin, driver.namespace) if key.startswith(prefix)]


async def claim_ids(driver: RedisJobDriver) -> list[str]:
    return [job.id for job in await driver.claim(10, LEASE_MS, ["t"])]


async def test_a_plain_job_holds_no_workflow_field_and_makes_no_workflow_key(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    job_id = await driver.enqueue(new_request())
    assert job_id is not None
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert job.depends_on == ()
    assert await driver.complete(job_id, job.lease_token)
    fields = await admin.hkeys(driver.keys.job(job_id))
    assert not set(fields) & set(WORKFLOW_FIELDS)
    assert await workflow_keys(admin, driver) == []


async def test_the_workflows_key_is_kept_while_a_job_is_open_then_expires_with_the_longest(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(retain_completed_ms=1_000, retain_failed_ms=RETAIN_MS)
    a, b = new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b, a)])
    key = driver.keys.workflow("wf")
    assert await admin.pttl(key) == -1
    assert await admin.hget(driver.keys.job(b.id), "waiting") == b"1"
    assert await admin.zscore(driver.keys.ready("t"), b.id) is None, "b waits for a"

    [job_a] = await driver.claim(10, LEASE_MS, ["t"])
    assert await driver.complete(a.id, job_a.lease_token)
    assert await admin.pttl(key) == -1, "b is open"
    assert not await admin.hexists(driver.keys.job(a.id), "dependents"), "released once"
    [job_b] = await driver.claim(10, LEASE_MS, ["t"])
    assert job_b.depends_on == (a.id,)
    assert await driver.fail(b.id, job_b.lease_token, error="no")

    # b, failed, is kept longer than a, completed: the workflow's key goes with b's record
    kept = await admin.pttl(key)
    assert RETAIN_MS < kept <= RETAIN_MS + EXPIRY_MARGIN_MS
    assert kept >= await admin.pttl(driver.keys.job(b.id)) - 1_000
    for job_id in (a.id, b.id):
        assert await admin.pttl(driver.keys.job(job_id)) > 0
    assert await admin.hget(key, "open") == b"0"


async def test_deleting_a_workflows_pending_jobs_leaves_no_workflow_key(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    a, b = new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b)])
    assert await workflow_keys(admin, driver) == [driver.keys.workflow("wf").encode()]
    assert await driver.purge(["pending"]) == 2
    assert await workflow_keys(admin, driver) == []
    for job_id in (a.id, b.id):
        assert not await admin.exists(driver.keys.job(job_id))


async def test_deleting_a_parent_cancels_down_the_dag_and_the_key_expires_with_them(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver(retain_failed_ms=RETAIN_MS)
    a, b, c = new_request(), new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b, a), step(c, b)])
    assert await driver.delete(a.id)
    for job_id in (b.id, c.id):
        info = await driver.get_job(job_id)
        assert info is not None
        assert info.state == "cancelled"
        assert await admin.pttl(driver.keys.job(job_id)) > RETAIN_MS
    assert RETAIN_MS < await admin.pttl(driver.keys.workflow("wf")) <= RETAIN_MS + EXPIRY_MARGIN_MS
    assert await driver.counts() == {
        "pending": 0, "active": 0, "completed": 0, "failed": 0, "cancelled": 2,
    }  # fmt: skip


async def test_a_stalled_parent_failed_by_a_claim_settles_its_dependents_in_that_claim(
    harness: RedisHarness,
) -> None:
    driver = harness.redis_driver()
    a = new_request(max_attempts=1, max_stalls=0)
    b, d = new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b, a), step(d, a, continue_after=(a,))])
    assert await claim_ids(driver) == [a.id]
    harness.clock.advance(LEASE_MS)
    assert await claim_ids(driver) == [], "a fails (stalled); d comes due with that"
    info_a, info_b = await driver.get_job(a.id), await driver.get_job(b.id)
    assert info_a is not None
    assert info_b is not None
    assert (info_a.state, info_a.last_error) == ("failed", stalled_error(1, 0))
    assert (info_b.state, info_b.last_error) == (
        "cancelled",
        workflow_cancelled_error(a.id, "t", "failed"),
    )
    assert await claim_ids(driver) == [d.id]


async def test_a_malformed_parent_failed_by_a_claim_cancels_its_dependent(
    harness: RedisHarness,
) -> None:
    driver = harness.redis_driver()
    a, b = new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b, a)])
    await harness.corrupt(a.id)
    assert await claim_ids(driver) == []
    info_a, info_b = await driver.get_job(a.id), await driver.get_job(b.id)
    assert info_a is not None
    assert info_b is not None
    assert info_a.state == "failed"
    assert (info_a.last_error or "").startswith("malformed job record")
    assert (info_b.state, info_b.last_error) == (
        "cancelled",
        workflow_cancelled_error(a.id, "t", "failed"),
    )
    assert [info.state for info in await driver.workflow_jobs("wf")] == ["failed", "cancelled"]


async def test_two_parents_failed_by_one_claim_release_their_dependent_once(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    p1, p2 = (new_request(max_attempts=1, max_stalls=0) for _ in range(2))
    callback = new_request()
    await driver.enqueue_workflow(
        "wf", [step(p1), step(p2), step(callback, p1, p2, continue_after=(p1, p2))]
    )
    assert sorted(await claim_ids(driver)) == sorted([p1.id, p2.id])
    harness.clock.advance(LEASE_MS)
    assert await claim_ids(driver) == [], "both fail in this claim, checked before any write"
    assert await admin.hget(driver.keys.job(callback.id), "waiting") == b"0"
    [job] = await driver.claim(10, LEASE_MS, ["t"])
    assert job.id == callback.id
    assert set(job.depends_on) == {p1.id, p2.id}
    assert await driver.claim(10, LEASE_MS, ["t"]) == []
    assert await admin.hget(driver.keys.workflow("wf"), "open") == b"1"
    assert await driver.complete(callback.id, job.lease_token)
    assert await admin.hget(driver.keys.workflow("wf"), "open") == b"0"
    assert await admin.pttl(driver.keys.workflow("wf")) > 0


async def test_a_requeued_job_reopens_its_workflow(harness: RedisHarness, admin: Redis) -> None:
    driver = harness.redis_driver()
    a = new_request(max_attempts=1)
    await driver.enqueue_workflow("wf", [step(a)])
    key = driver.keys.workflow("wf")
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.fail(a.id, job.lease_token, error="no")
    assert await admin.pttl(key) > 0
    assert await driver.requeue(a.id)
    assert await admin.pttl(key) == -1
    assert await admin.hget(key, "open") == b"1"
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.complete(a.id, job.lease_token)
    assert await admin.pttl(key) > 0
    assert [info.state for info in await driver.workflow_jobs("wf")] == ["completed"]


async def test_the_script_refuses_a_workflow_whole_before_any_write(
    harness: RedisHarness, admin: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver checks a workflow before it sends it; the script checks it again (another
    version of the driver, a job stored meanwhile): with the driver's check out of the way,
    each refusal leaves every key as it was."""
    monkeypatch.setattr("redis_jobs.workflows.check_workflow", lambda *_: None)
    driver = harness.redis_driver()
    taken = new_request()
    assert await driver.enqueue(taken) is not None
    before = await namespace_snapshot(admin, driver.namespace)
    first = new_request()
    refused = {
        "a parent not stored before": [step(first), step(new_request(), taken)],
        "an existing id": [step(first), step(taken, first)],
        "a repeated id": [step(first), step(first)],
    }
    for why, jobs in refused.items():
        with pytest.raises(RedisScriptError):
            await driver.enqueue_workflow("wf", jobs)
        assert await namespace_snapshot(admin, driver.namespace) == before, why
    await driver.enqueue_workflow("wf", [step(first)])
    with pytest.raises(RedisScriptError, match="exists already"):
        await driver.enqueue_workflow("wf", [step(new_request())])


async def test_a_malformed_dependent_refuses_its_parents_settle_without_writes(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    a, b = new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b, a)])
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    await admin.hset(driver.keys.job(b.id), "waiting", "many")
    before = await unchanged_but_the_workflow(admin, driver)
    for settle in (
        lambda: driver.complete(a.id, job.lease_token),
        lambda: driver.fail(a.id, job.lease_token, error="no"),
        lambda: driver.cancel(a.id),
    ):
        with pytest.raises(RedisScriptError):
            await settle()
        assert await unchanged_but_the_workflow(admin, driver) == before


async def unchanged_but_the_workflow(admin: Redis, driver: RedisJobDriver) -> object:
    """The namespace's keys byte for byte (DUMP), but the workflow's hash by its fields: a
    hash past the listpack size limits DUMPs its fields in its table's order, which a read may
    change (incremental rehashing)."""
    workflows = set(await workflow_keys(admin, driver))
    keys = [key for key in await namespace_keys(admin, driver.namespace) if key not in workflows]
    return (
        await snapshot(admin, keys),
        {key: (await admin.hgetall(key), await admin.pttl(key)) for key in sorted(workflows)},
    )


async def test_a_job_stored_later_under_a_workflow_jobs_id_is_not_listed_in_it(
    harness: RedisHarness,
) -> None:
    driver = harness.redis_driver(retain_completed_ms=RETAIN_MS)
    a = new_request()
    await driver.enqueue_workflow("wf", [step(a)])
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    assert await driver.complete(a.id, job.lease_token)
    harness.clock.advance(RETAIN_MS)
    assert await driver.workflow_jobs("wf") == [], "its retention ended"
    again = replace(new_request(), id=a.id)
    assert await driver.enqueue(again) == a.id  # the ended record is replaced
    assert await driver.workflow_jobs("wf") == []
    info = await driver.get_job(a.id)
    assert info is not None
    assert (info.state, info.workflow_id) == ("pending", None)


async def test_dependents_cancelled_past_retention_leave_the_indexes_with_a_later_cascade(
    harness: RedisHarness, admin: Redis
) -> None:
    """A cascade prunes the cancelled jobs whose retention ended, as an operator's cancel does:
    a store whose cancels all come from workflows does not keep their entries forever."""
    driver = harness.redis_driver(retain_failed_ms=RETAIN_MS)
    keys = driver.keys

    async def cancel_a_dependent(workflow_id: str) -> str:
        parent, child = new_request(max_attempts=1), new_request()
        await driver.enqueue_workflow(workflow_id, [step(parent), step(child, parent)])
        [job] = await driver.claim(1, LEASE_MS, ["t"])
        assert await driver.fail(parent.id, job.lease_token, error="no")
        return child.id

    old = await cancel_a_dependent("first")
    assert await admin.zrange(keys.state("cancelled"), 0, -1) == [old.encode()]
    harness.clock.advance(RETAIN_MS)
    await admin.delete(keys.job(old))  # its record expires (PEXPIRE, real time)
    new = await cancel_a_dependent("second")
    for index in (keys.cancelled, keys.state("cancelled"), keys.state("cancelled", "t")):
        assert await admin.zrange(index, 0, -1) == [new.encode()]
    assert (await driver.stats())["t"].cancelled == 1


async def test_a_workflow_key_of_the_wrong_type_is_refused_before_any_write(
    harness: RedisHarness, admin: Redis
) -> None:
    driver = harness.redis_driver()
    a, b = new_request(), new_request()
    await driver.enqueue_workflow("wf", [step(a), step(b, a)])
    [job] = await driver.claim(1, LEASE_MS, ["t"])
    await admin.delete(driver.keys.workflow("wf"))
    await admin.set(driver.keys.workflow("wf"), "not a hash")
    before = await namespace_snapshot(admin, driver.namespace)
    for settle in (
        lambda: driver.complete(a.id, job.lease_token),
        lambda: driver.cancel(b.id),
        lambda: driver.delete(b.id),
        lambda: driver.workflow_jobs("wf"),
        lambda: driver.enqueue_workflow("wf", [step(new_request())]),
    ):
        with pytest.raises(RedisScriptError):
            await settle()
        assert await namespace_snapshot(admin, driver.namespace) == before


async def test_one_purge_of_a_dependent_and_its_parents_leaves_no_trace_of_it(
    harness: RedisHarness, admin: Redis
) -> None:
    """One purge call deletes a parent (its dependent on a continue edge then waits for one
    parent less), the dependent, then the other parent: the dependent stays deleted. The ids
    set the order (the pending index lists jobs of one created_at by id)."""
    driver = harness.redis_driver()
    p1, callback, p2 = (replace(new_request(), id=f"{n}-{uuid.uuid4().hex}") for n in range(3))
    both = (p1, p2)
    await driver.enqueue_workflow(
        "wf", [step(p1), step(p2), step(callback, *both, continue_after=both)]
    )
    listed = await admin.zrange(driver.keys.state("pending"), 0, -1)
    assert listed == [job.id.encode() for job in (p1, callback, p2)]
    assert await driver.purge(["pending"]) == 3  # one call: one chunk
    for job in (p1, p2, callback):
        assert not await admin.exists(driver.keys.job(job.id))
    assert await admin.zrange(driver.keys.ready("t"), 0, -1) == []
    assert await workflow_keys(admin, driver) == []
