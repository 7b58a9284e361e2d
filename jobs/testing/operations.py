"""The conformance cases of the operations SPI: list, find, requeue, cancel, purge, stats, workers.

Part of ``DriverConformance``. A driver that does not implement these calls yet names the cases
it skips, with a reason, in ``skipped_cases`` (``OPERATIONS_CASES`` lists them all).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import ClassVar

import pytest

from jobs.clock import to_datetime
from jobs.spi import JOB_STATES, MAX_ERRORS_KEPT, JobState, WorkerRegistration, stalled_error

from .dashboard_cases import DASHBOARD_CASES
from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue, failed_job, info_of, ms
from .operation_races import OperationRaceCases
from .requests import new_request


class OperationsConformance(OperationRaceCases):
    skipped_cases: ClassVar[Mapping[str, str]] = {}
    """Case name -> reason, for a driver that does not implement a call yet (named issue)."""

    @pytest.fixture(autouse=True)
    def _skip_unsupported(self, request: pytest.FixtureRequest) -> None:
        name = getattr(request.node, "originalname", request.node.name)
        reason = self.skipped_cases.get(name)
        if reason is not None:
            pytest.skip(reason)

    # -- what JobInfo records --------------------------------------------------------------------

    async def test_job_info_records_created_and_finished_times(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        created = clock.now_ms()
        job_id = await enqueue(driver)
        pending = await info_of(driver, job_id)
        assert (ms(pending, "created_at"), pending.finished_at) == (created, None)
        clock.advance(1_500)
        job = await claim_one(driver)
        clock.advance(2_500)
        assert await driver.complete(job_id, job.lease_token)
        done = await info_of(driver, job_id)
        assert (ms(done, "created_at"), ms(done, "finished_at")) == (created, created + 4_000)
        assert done.errors == ()

    async def test_errors_keep_every_failed_attempt_newest_last(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        total = MAX_ERRORS_KEPT + 3
        job_id = await enqueue(driver, max_attempts=total)
        for attempt in range(1, total):
            job = await claim_one(driver)
            assert await driver.retry(job_id, job.lease_token, delay_ms=0, error=f"e{attempt}")
            clock.advance(10)
        last = await claim_one(driver)
        assert await driver.fail(job_id, last.lease_token, error="final")
        info = await info_of(driver, job_id)
        assert len(info.errors) == MAX_ERRORS_KEPT
        kept = [(error.attempt, error.error) for error in info.errors]
        first_kept = total - MAX_ERRORS_KEPT + 1
        expected = [(n, f"e{n}") for n in range(first_kept, total)] + [(total, "final")]
        assert kept == expected
        assert info.last_error == "final"
        assert info.errors[-1].at == to_datetime(clock.now_ms())

    async def test_a_job_failed_by_stalls_keeps_the_stalled_error_of_its_attempt(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, max_attempts=1, max_stalls=0)
        await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS)
        assert await driver.claim(1, LEASE_MS, ALL) == []
        info = await info_of(driver, job_id)
        assert [(e.attempt, e.error) for e in info.errors] == [(1, stalled_error(1, 0))]

    async def test_a_reclaimed_delivery_says_so(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        await enqueue(driver)
        first = await claim_one(driver)
        assert first.reclaimed is False
        driver_harness.clock.advance(LEASE_MS)
        again = await claim_one(driver)
        assert (again.attempt, again.stalls, again.reclaimed) == (1, 1, True)
        assert await driver.retry(again.id, again.lease_token, delay_ms=0, error="x")
        third = await claim_one(driver)
        assert (third.attempt, third.stalls, third.reclaimed) == (2, 1, False)

    # -- list_jobs -------------------------------------------------------------------------------

    async def test_list_jobs_pages_newest_first(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        ids = []
        for _ in range(7):
            ids.append(await enqueue(driver))
            driver_harness.clock.advance(1)
        newest_first = ids[::-1]
        seen: list[list[str]] = []
        cursor = None
        while True:
            page = await driver.list_jobs(limit=3, cursor=cursor)
            seen.append([job.id for job in page.jobs])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [newest_first[:3], newest_first[3:6], newest_first[6:]]
        whole = await driver.list_jobs(limit=7)
        assert ([job.id for job in whole.jobs], whole.next_cursor) == (newest_first, None)
        assert whole.jobs[0] == await driver.get_job(newest_first[0])

    async def test_list_jobs_ties_break_by_id_descending(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        ids = [await enqueue(driver) for _ in range(12)]
        pages = []
        cursor = None
        for _ in range(3):
            page = await driver.list_jobs(limit=5, cursor=cursor)
            pages.append([job.id for job in page.jobs])
            cursor = page.next_cursor
        assert cursor is None
        assert [job_id for page in pages for job_id in page] == sorted(ids, reverse=True)

    async def test_list_jobs_filters_by_state_and_type(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        pending_a = await enqueue(driver, "a", delay_ms=60_000)
        failed_a = await failed_job(driver, "a")
        failed_b = await failed_job(driver, "b")
        active_b = await enqueue(driver, "b")
        await claim_one(driver, ["b"])

        async def listed(state: JobState | None = None, job_type: str | None = None) -> set[str]:
            page = await driver.list_jobs(state=state, job_type=job_type, limit=100)
            return {job.id for job in page.jobs}

        assert await listed() == {pending_a, failed_a, failed_b, active_b}
        assert await listed(state="failed") == {failed_a, failed_b}
        assert await listed(job_type="a") == {pending_a, failed_a}
        assert await listed(state="failed", job_type="b") == {failed_b}
        assert await listed(state="active") == {active_b}
        assert await listed(state="cancelled") == set()
        assert await listed(job_type="missing") == set()
        assert await driver.requeue(failed_a)
        assert await listed(state="failed") == {failed_b}
        assert await listed(state="pending", job_type="a") == {pending_a, failed_a}

    async def test_list_jobs_paging_is_stable_while_jobs_arrive(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        ids = []
        for _ in range(25):
            ids.append(await enqueue(driver))
            clock.advance(1)
        newest_first = ids[::-1]
        first = await driver.list_jobs(limit=10)
        for _ in range(5):
            await enqueue(driver)
            clock.advance(1)
        second = await driver.list_jobs(limit=10, cursor=first.next_cursor)
        await enqueue(driver)
        third = await driver.list_jobs(limit=10, cursor=second.next_cursor)
        assert [job.id for job in first.jobs] == newest_first[:10]
        assert [job.id for job in second.jobs] == newest_first[10:20]
        assert [job.id for job in third.jobs] == newest_first[20:]
        assert third.next_cursor is None

    # -- find_job --------------------------------------------------------------------------------

    async def test_find_job_by_key(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, key="receipt:7")
        await enqueue(driver, key="receipt:8")
        found = await driver.find_job("receipt:7")
        assert found == await driver.get_job(job_id)
        assert await driver.find_job("receipt:9") is None
        job = await claim_one(driver)
        assert await driver.complete(job.id, job.lease_token)
        assert await driver.purge(["completed"]) == 1
        assert await driver.find_job(job.key or "") is None

    # -- requeue (an operator's retry) -----------------------------------------------------------

    async def test_requeue_gives_a_failed_job_exactly_one_more_attempt(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver, payload={"n": 1}, key="k", max_attempts=2)
        job = await claim_one(driver)
        assert await driver.retry(job_id, job.lease_token, delay_ms=0, error="first")
        job = await claim_one(driver)
        assert await driver.fail(job_id, job.lease_token, error="second")
        clock.advance(5_000)
        assert await driver.requeue(job_id)
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.max_attempts) == ("pending", 2, 3)
        assert (info.payload, info.key, info.finished_at) == ({"n": 1}, "k", None)
        assert ms(info, "run_at") == clock.now_ms()
        assert [e.error for e in info.errors] == ["first", "second"]
        again = await claim_one(driver)
        assert (again.id, again.attempt, again.max_attempts) == (job_id, 3, 3)
        assert await driver.fail(job_id, again.lease_token, error="third")
        assert await driver.requeue(job_id)
        assert (await info_of(driver, job_id)).max_attempts == 4
        assert await driver.enqueue(new_request(key="k")) is None

    async def test_requeue_of_a_cancelled_job(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, max_attempts=5)
        assert await driver.cancel(job_id)
        assert await driver.requeue(job_id)
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.max_attempts) == ("pending", 0, 1)
        assert (await claim_one(driver)).id == job_id

    async def test_requeue_refuses_every_other_state(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        now = driver_harness.clock.now_ms()
        pending = await enqueue(driver, run_at_ms=now + 60_000)
        active = await enqueue(driver, run_at_ms=now - 2)
        done = await enqueue(driver, run_at_ms=now - 1)
        job = await claim_one(driver)
        assert job.id == active
        finished = await claim_one(driver)
        assert await driver.complete(done, finished.lease_token)
        for job_id in (pending, active, done):
            before = await info_of(driver, job_id)
            assert await driver.requeue(job_id) is False
            assert await driver.get_job(job_id) == before
        assert await driver.requeue(uuid.uuid4().hex) is False
        assert await driver.heartbeat(active, job.lease_token, LEASE_MS)

    async def test_requeue_failed_moves_every_failed_job_of_a_type(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        of_a = [await failed_job(driver, "a") for _ in range(3)]
        of_b = [await failed_job(driver, "b") for _ in range(2)]
        cancelled = await enqueue(driver, "a")
        assert await driver.cancel(cancelled)
        assert await driver.requeue_failed("a") == 3
        assert {(await info_of(driver, j)).state for j in of_a} == {"pending"}
        assert {(await info_of(driver, j)).state for j in of_b} == {"failed"}
        assert (await info_of(driver, cancelled)).state == "cancelled"
        assert await driver.requeue_failed() == 2
        assert await driver.requeue_failed() == 0
        assert (await driver.counts())["failed"] == 0

    # -- cancel ----------------------------------------------------------------------------------

    async def test_cancel_a_pending_job(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver, key="k", delay_ms=1_000)
        clock.advance(10)
        assert await driver.cancel(job_id)
        info = await info_of(driver, job_id)
        assert (info.state, ms(info, "finished_at")) == ("cancelled", clock.now_ms())
        clock.advance(LEASE_MS)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        assert await driver.cancel(job_id) is False
        assert await driver.enqueue(new_request(key="k")) is None
        assert (await driver.counts())["cancelled"] == 1

    async def test_cancel_an_active_job_revokes_its_lease(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        job = await claim_one(driver)
        assert await driver.cancel(job_id)
        cancelled = await info_of(driver, job_id)
        assert (cancelled.state, cancelled.attempts) == ("cancelled", 1)
        assert await driver.heartbeat(job_id, job.lease_token, LEASE_MS) is False
        assert await driver.complete(job_id, job.lease_token) is False
        assert await driver.retry(job_id, job.lease_token, delay_ms=0, error="late") is False
        assert await driver.fail(job_id, job.lease_token, error="late") is False
        driver_harness.clock.advance(LEASE_MS * 2)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        assert await driver.get_job(job_id) == cancelled

    async def test_cancel_refuses_finished_and_unknown_jobs(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        done = await enqueue(driver)
        job = await claim_one(driver)
        assert await driver.complete(done, job.lease_token)
        failed = await failed_job(driver)
        for job_id in (done, failed):
            before = await info_of(driver, job_id)
            assert await driver.cancel(job_id) is False
            assert await driver.get_job(job_id) == before
        assert await driver.cancel(uuid.uuid4().hex) is False

    # -- purge -----------------------------------------------------------------------------------

    async def test_purge_deletes_jobs_in_states_and_frees_their_keys(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        done = []
        for n in range(3):
            job_id = await enqueue(driver, key=f"done:{n}")
            job = await claim_one(driver)
            assert await driver.complete(job_id, job.lease_token)
            done.append(job_id)
        failed = await failed_job(driver, key="failed:0")
        pending = await enqueue(driver, key="pending:0", delay_ms=60_000)
        assert await driver.purge(["completed"]) == 3
        assert [await driver.get_job(job_id) for job_id in done] == [None] * 3
        assert (await info_of(driver, failed)).state == "failed"
        assert await driver.purge(["failed", "cancelled", "pending"]) == 2
        assert await driver.get_job(pending) is None
        assert await driver.counts() == dict.fromkeys(JOB_STATES, 0)
        for key in ("done:0", "failed:0", "pending:0"):
            assert await driver.enqueue(new_request(key=key)) is not None

    async def test_purge_by_type_and_age(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        old_a = await failed_job(driver, "a")
        old_b = await failed_job(driver, "b")
        old_pending = await enqueue(driver, "a", delay_ms=LEASE_MS * 10)
        clock.advance(10_000)
        new_a = await failed_job(driver, "a")
        clock.advance(5_000)
        assert await driver.purge(["failed", "pending"], "a", older_than_ms=15_001) == 0
        assert await driver.purge(["failed", "pending"], "a", older_than_ms=15_000) == 2
        assert await driver.get_job(old_a) is None
        assert await driver.get_job(old_pending) is None
        assert (await info_of(driver, new_a)).state == "failed"
        assert (await info_of(driver, old_b)).state == "failed"
        assert await driver.purge(["failed"], older_than_ms=5_000) == 2

    # -- stats -----------------------------------------------------------------------------------

    async def test_stats_count_each_type_by_state(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        assert await driver.stats() == {}
        for _ in range(2):
            await enqueue(driver, "a")
            job = await claim_one(driver, ["a"])
            assert await driver.complete(job.id, job.lease_token)
        await failed_job(driver, "a")
        await enqueue(driver, "a")
        await claim_one(driver, ["a"])
        assert await driver.cancel(await enqueue(driver, "a"))
        await enqueue(driver, "a")
        clock.advance(3_000)
        await enqueue(driver, "a")
        await enqueue(driver, "a", delay_ms=60_000)
        await enqueue(driver, "b", delay_ms=10)
        clock.advance(500)
        stats = await driver.stats()
        assert sorted(stats) == ["a", "b"]
        a, b = stats["a"], stats["b"]
        assert (a.type, a.due, a.scheduled, a.active) == ("a", 2, 1, 1)
        assert (a.completed, a.failed, a.cancelled) == (2, 1, 1)
        assert a.oldest_due_age_ms == 3_500
        assert (b.type, b.due, b.scheduled, b.active, b.completed) == ("b", 1, 0, 0, 0)
        assert b.oldest_due_age_ms == 490

    # -- workers ---------------------------------------------------------------------------------

    async def test_workers_register_refresh_and_expire(self, driver_harness: DriverHarness) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        clock = driver_harness.clock
        assert await first.list_workers() == []
        started = clock.now_ms()
        worker = WorkerRegistration(
            id="w1", host="host-a", pid=4242, types=("a", "b"), concurrency=8, in_flight=0
        )
        await first.register_worker(worker, ttl_ms=3_000)
        clock.advance(2_000)
        other = WorkerRegistration(
            id="w2", host="host-b", pid=7, types=("c",), concurrency=1, in_flight=1
        )
        await second.register_worker(other, ttl_ms=3_000)
        busy = WorkerRegistration(
            id="w1", host="host-a", pid=4242, types=("a", "b"), concurrency=8, in_flight=3
        )
        await first.register_worker(busy, ttl_ms=3_000)
        listed = await second.list_workers()
        assert [w.id for w in listed] == ["w1", "w2"]
        w1 = listed[0]
        assert (w1.host, w1.pid, w1.types, w1.concurrency, w1.in_flight) == (
            "host-a",
            4242,
            ("a", "b"),
            8,
            3,
        )
        assert w1.started_at == to_datetime(started)
        assert w1.last_seen == to_datetime(started + 2_000)
        clock.advance(2_999)
        assert [w.id for w in await first.list_workers()] == ["w1", "w2"]
        clock.advance(1)
        assert [w.id for w in await first.list_workers()] == []
        await first.register_worker(worker, ttl_ms=3_000)
        await first.deregister_worker("w1")
        await first.deregister_worker("unknown")
        assert await second.list_workers() == []


OPERATIONS_CASES: tuple[str, ...] = (
    tuple(
        name
        for name in [*vars(OperationsConformance), *vars(OperationRaceCases)]
        if name.startswith("test_")
        and name != "test_bad_arguments_name_themselves_and_write_nothing"
    )
    + DASHBOARD_CASES
)
"""The cases that need the operations SPI (the queue's argument checks need no driver support),
for a driver's ``skipped_cases`` while it lacks it."""
