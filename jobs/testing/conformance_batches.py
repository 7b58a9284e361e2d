"""The batch rules of the driver SPI (``enqueue_many``, ``complete_many``), part of
``DriverConformance``."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from jobs.errors import PayloadError
from jobs.new_job import NewJob
from jobs.queue import JobQueue

from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue, info_of
from .requests import new_request

if TYPE_CHECKING:
    from jobs.spi import JobDriver


class _RecordingDriver:
    """Delegates to a driver and records which of its methods were called."""

    def __init__(self, driver: JobDriver) -> None:
        self.driver = driver
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.driver, name)


class BatchConformance:
    """``enqueue_many``: one call per batch, results in order, keys deduplicated per job.
    ``complete_many``: each job fenced by its own token, results in order."""

    async def test_enqueue_many_stores_every_job_and_answers_in_order(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        requests = [
            new_request("a", {"n": 0}),
            new_request("b", {"n": 1}, key="batch:1", max_attempts=5),
            new_request("a", {"n": 2}, delay_ms=60_000),
            new_request("c", None, key="batch:3", timeout_ms=2_000),
        ]
        assert await driver.enqueue_many(requests) == [request.id for request in requests]
        now = driver_harness.clock.now_ms()
        for request, delay in zip(requests, (0, 0, 60_000, 0), strict=True):
            info = await driver.get_job(request.id)
            assert info is not None
            assert (info.type, info.state, info.key) == (request.type, "pending", request.key)
            assert info.payload == json.loads(request.payload)
            assert info.max_attempts == request.max_attempts
            assert info.timeout_ms == request.timeout_ms
            assert int(info.run_at.timestamp() * 1000) == now + delay
        claimed = await driver.claim(10, LEASE_MS, ("a", "b", "c"))
        assert sorted(job.id for job in claimed) == sorted(
            request.id for request in requests if request.delay_ms == 0
        )

    async def test_enqueue_many_of_nothing_is_empty(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        assert await driver.enqueue_many([]) == []
        assert sum((await driver.counts()).values()) == 0

    async def test_the_first_job_of_a_batch_holding_a_key_wins(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        first = new_request(payload="first", key="dup")
        second = new_request(payload="second", key="dup")
        other = new_request(payload="other", key="free")
        unkeyed = new_request(payload="unkeyed")
        results = await driver.enqueue_many([first, second, other, unkeyed])
        assert results == [first.id, None, other.id, unkeyed.id]
        assert await driver.get_job(second.id) is None
        info = await driver.get_job(first.id)
        assert info is not None
        assert info.payload == "first"
        assert sum((await driver.counts()).values()) == 3

    async def test_a_batch_drops_keys_held_by_live_jobs_in_every_state(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        pending = new_request(key="k:pending")
        active = new_request(key="k:active")
        done = new_request(key="k:done")
        for request in (active, done, pending):
            assert await driver.enqueue(request) == request.id
            if request is not pending:
                job = (await driver.claim(1, LEASE_MS, ("t",)))[0]
                assert job.id == request.id
                if request is done:
                    assert await driver.complete(job.id, job.lease_token)
        batch = [new_request(key=key) for key in ("k:pending", "k:new", "k:active", "k:done")]
        results = await driver.enqueue_many(batch)
        assert results == [None, batch[1].id, None, None]
        assert sum((await driver.counts()).values()) == 4

    async def test_a_large_batch_is_stored_whole_and_wakes_a_waiter(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        waiter = asyncio.create_task(driver.wait_for_work(("t",), 10_000))
        await asyncio.sleep(0.05)  # let the waiter start waiting before the batch lands
        requests = [new_request(payload=i, key=f"bulk:{i}" if i % 2 else None) for i in range(450)]
        assert await driver.enqueue_many(requests) == [request.id for request in requests]
        async with asyncio.timeout(5):
            await waiter
        claimed = await driver.claim(1_000, LEASE_MS, ("t",))
        assert sorted(json.loads(job.payload) for job in claimed) == list(range(450))

    async def test_concurrent_batches_sharing_a_key_store_it_once(
        self, driver_harness: DriverHarness
    ) -> None:
        drivers = [await driver_harness.driver() for _ in range(3)]
        batches = [[new_request(key="shared"), new_request(key=f"own:{i}")] for i in range(6)]
        results = await asyncio.gather(
            *(drivers[i % 3].enqueue_many(batch) for i, batch in enumerate(batches))
        )
        assert sum(result[0] is not None for result in results) == 1
        assert all(result[1] == batch[1].id for result, batch in zip(results, batches, strict=True))
        assert sum((await drivers[0].counts()).values()) == 7

    async def test_a_bad_payload_refuses_the_whole_batch_before_any_io(
        self, driver_harness: DriverHarness
    ) -> None:
        recording = _RecordingDriver(await driver_harness.driver())
        queue = JobQueue(recording)  # a proxy of a JobDriver
        batch = [
            NewJob(type="t", payload={"ok": 1}, key="fine"),
            NewJob(type="t", payload={"ok": 2}),
            NewJob(type="t", payload={"items": [1, {"deep": {1, 2}}]}),
        ]
        with pytest.raises(PayloadError, match=r'payload\["items"\]\[1\]\["deep"\]') as caught:
            await queue.enqueue_many(batch)
        assert "job 2 of the batch" in "\n".join(caught.value.__notes__)
        assert recording.calls == []
        assert sum((await recording.driver.counts()).values()) == 0

    # -- complete_many -------------------------------------------------------------------------

    async def test_complete_many_fences_each_job_on_its_own(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        reclaimed_id = await enqueue(driver)
        stale = await claim_one(driver)
        clock.advance(LEASE_MS)
        holder = await claim_one(driver)  # the job's lease expired: ``stale`` is stale now
        ids = [await enqueue(driver, key=f"done:{i}") for i in range(3)]
        one, two, three = sorted(
            await driver.claim(3, LEASE_MS, ALL), key=lambda j: ids.index(j.id)
        )
        results = await driver.complete_many(
            [
                (one.id, one.lease_token),
                (reclaimed_id, stale.lease_token),
                (two.id, three.lease_token),  # another job's token
                ("no-such-job", one.lease_token),
                (three.id, three.lease_token),
            ]
        )
        assert results == [True, False, False, False, True]
        assert [(await info_of(driver, job_id)).state for job_id in ids] == [
            "completed",
            "active",
            "completed",
        ]
        held = await info_of(driver, reclaimed_id)
        assert (held.state, held.attempts, held.stalls) == ("active", 1, 1)
        assert await driver.heartbeat(reclaimed_id, holder.lease_token, LEASE_MS)
        assert await driver.complete(two.id, two.lease_token)
        assert (await driver.counts())["completed"] == 3

    async def test_jobs_completed_in_a_batch_are_finished_like_one_by_one(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        requests = [new_request(payload=i, key=f"once:{i}") for i in range(450)]
        await driver.enqueue_many(requests)
        claimed = await driver.claim(1_000, LEASE_MS, ALL)
        assert len(claimed) == 450
        settles = [(job.id, job.lease_token) for job in claimed]
        assert await driver.complete_many(settles) == [True] * 450
        assert await driver.complete_many(settles[:3]) == [False] * 3  # terminal
        counts = await driver.counts()
        assert (counts["completed"], counts["active"], counts["pending"]) == (450, 0, 0)
        info = await info_of(driver, claimed[0].id)
        assert info.finished_at is not None
        assert (info.attempts, info.last_error) == (1, None)
        # Kept for retention, so their keys still drop repeats.
        assert await driver.enqueue(new_request(key="once:0")) is None
        assert await driver.claim(10, LEASE_MS, ALL) == []

    async def test_complete_many_of_nothing_is_empty(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        assert await driver.complete_many([]) == []
        assert (await info_of(driver, job_id)).state == "pending"
