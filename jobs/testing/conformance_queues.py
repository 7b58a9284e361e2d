"""Conformance: named queues (issue 30). A job waits in one named queue (``"default"`` unless
the request, its handler or its definition names another); a claim of a queue never takes a
job of another, pending or with an expired lease. A job keeps its queue through a retry, a
release and an operator's requeue; ``JobInfo.queue`` and ``list_jobs(queue=...)`` report it.
A runner serving several queues in strict order drains the first before the next; one with
weights serves them all; one serving a queue leaves the others' jobs alone. A bad queue name
is refused before any write. A live idempotency key is taken in every queue, and a workflow
may span queues, except where the harness says otherwise (``keys_per_queue``,
``workflows_in_one_queue``: Redis, each queue in a hash slot of its own).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobs.errors import DriverError, JobOptionError
from jobs.handlers import JobHandlerRegistry
from jobs.new_job import NewJob
from jobs.queue import JobQueue
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import JobDriver, QueueOperations, WorkflowJob, WorkflowStore

from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue, info_of, wait_until
from .requests import new_request

_HEARTBEAT_MS = 1_000
_CROWD = 600
"""Jobs of another queue enqueued after each of a queue's few (3,000 in all)."""


async def _claim_ids(driver: JobDriver, queue: str, limit: int = 10) -> list[str]:
    return [job.id for job in await driver.claim(limit, LEASE_MS, ALL, queue)]


async def _states(driver: JobDriver, ids: list[str]) -> list[str]:
    return [(await info_of(driver, job_id)).state for job_id in ids]


class QueueConformance:
    """A claim takes only jobs of its queue; jobs report theirs."""

    async def test_a_job_without_a_queue_is_in_default_and_a_claim_without_one_takes_it(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        plain = await enqueue(driver)
        assert (await info_of(driver, plain)).queue == "default"
        assert await _claim_ids(driver, "emails") == []
        assert (await claim_one(driver)).id == plain

    async def test_a_claim_of_one_queue_never_takes_a_job_of_another(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        emails = [await enqueue(driver, queue="emails") for _ in range(3)]
        exports = await enqueue(driver, queue="exports")
        plain = await enqueue(driver)
        assert (await info_of(driver, emails[0])).queue == "emails"
        assert sorted(await _claim_ids(driver, "emails")) == sorted(emails)
        assert await _claim_ids(driver, "emails") == []
        assert await _claim_ids(driver, "exports") == [exports]
        assert [job.id for job in await driver.claim(10, LEASE_MS, ALL)] == [plain]

    async def test_an_expired_lease_is_reclaimed_only_from_its_queue(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, queue="emails")
        assert await _claim_ids(driver, "emails") == [job_id]
        driver_harness.clock.advance(LEASE_MS + 1)
        assert await driver.claim(10, LEASE_MS, ALL) == []  # the default queue's claim
        assert await _claim_ids(driver, "exports") == []
        [again] = await driver.claim(10, LEASE_MS, ALL, "emails")
        assert (again.id, again.reclaimed) == (job_id, True)

    async def test_a_job_keeps_its_queue_through_retry_release_and_requeue(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, queue="emails", max_attempts=1)
        [held] = await driver.claim(1, LEASE_MS, ALL, "emails")
        assert await driver.release(job_id, held.lease_token)
        assert await driver.claim(1, LEASE_MS, ALL) == []
        [held] = await driver.claim(1, LEASE_MS, ALL, "emails")
        assert await driver.retry(job_id, held.lease_token, delay_ms=0, error="E: again")
        assert await driver.claim(1, LEASE_MS, ALL) == []
        [held] = await driver.claim(1, LEASE_MS, ALL, "emails")
        assert await driver.fail(job_id, held.lease_token, error="E: boom")
        assert await driver.requeue(job_id)
        assert await driver.claim(1, LEASE_MS, ALL) == []
        assert await _claim_ids(driver, "emails") == [job_id]
        assert (await info_of(driver, job_id)).queue == "emails"

    async def test_a_live_key_is_taken_in_every_queue_unless_keys_are_per_queue(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        first = await enqueue(driver, queue="emails", key="k")
        second = await driver.enqueue(new_request(queue="exports", key="k"))
        if getattr(driver_harness, "keys_per_queue", False):
            assert second is not None, "a key is unique within its queue only"
            assert (await info_of(driver, second)).queue == "exports"
        else:
            assert second is None, "a live key drops the enqueue, whatever its queue"
        found = await driver.find_job("k")
        assert found is not None
        assert found.id in (first, second)

    async def test_a_workflow_may_span_queues_unless_the_driver_keeps_it_in_one(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        if not isinstance(driver, WorkflowStore):
            pytest.skip("this driver stores no workflows (jobs.spi.WorkflowStore is optional)")
        parent = new_request(queue="exports")
        child = new_request(queue="emails")
        jobs = [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
        if getattr(driver_harness, "workflows_in_one_queue", False):
            with pytest.raises(DriverError, match="one queue"):
                await driver.enqueue_workflow("wf", jobs)
            assert sum((await driver.counts()).values()) == 0
            return
        await driver.enqueue_workflow("wf", jobs)
        assert await _claim_ids(driver, "emails") == []
        [held] = await driver.claim(1, LEASE_MS, ALL, "exports")
        assert await driver.complete(parent.id, held.lease_token)
        assert await _claim_ids(driver, "emails") == [child.id]

    async def test_list_jobs_of_a_queue(self, driver_harness: DriverHarness) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        emails = [await enqueue(driver, queue="emails") for _ in range(3)]
        await enqueue(driver)
        await enqueue(driver, "other", queue="exports")
        queue = JobQueue(driver)
        page = await queue.list_jobs(queue="emails", limit=2)
        assert len(page.jobs) == 2
        assert page.next_cursor is not None
        rest = await queue.list_jobs(queue="emails", limit=2, cursor=page.next_cursor)
        listed = [job.id for job in page.jobs + rest.jobs]
        assert sorted(listed) == sorted(emails)
        assert rest.next_cursor is None
        assert {job.queue for job in page.jobs + rest.jobs} == {"emails"}
        pending = await queue.list_jobs(queue="exports", state="pending")
        assert [job.type for job in pending.jobs] == ["other"]
        assert (await queue.list_jobs(queue="nothing-here")).jobs == []
        everything = await queue.list_jobs()
        assert len(everything.jobs) == 5

    async def test_list_jobs_of_a_queue_gives_full_pages_among_other_queues_jobs(
        self, driver_harness: DriverHarness
    ) -> None:
        """A page of one queue holds ``limit`` of its jobs, newest first, however many jobs of
        other queues lie between them, in every state and of every type; so does a page of
        "default"; the last page's next_cursor is None."""
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        ids: dict[str, list[str]] = {"emails": [], "exports": [], "default": []}
        others: list[str] = []  # emails of another type
        order: list[str] = []  # every job, oldest first
        for i in range(7):
            for name in ("emails", "exports", "exports", "default"):
                ids[name].append(await enqueue(driver, queue=name))
                order.append(ids[name][-1])
                clock.advance(1)
            if i % 3 == 0:
                others.append(await enqueue(driver, "u", queue="emails"))
                order.append(others[-1])
                clock.advance(1)
        for name in ("emails", "exports", "default"):  # the 3 oldest completed, the next active
            for held in await driver.claim(3, LEASE_MS, ALL, name):
                assert await driver.complete(held.id, held.lease_token)
            assert len(await driver.claim(1, LEASE_MS, ALL, name)) == 1
        queue = JobQueue(driver)

        async def pages(limit: int, **filters: Any) -> list[list[str]]:
            listed: list[list[str]] = []
            cursor = None
            while True:
                page = await queue.list_jobs(limit=limit, cursor=cursor, **filters)
                listed.append([job.id for job in page.jobs])
                if page.next_cursor is None:
                    return listed
                assert len(page.jobs) == limit, f"a short page with a next cursor: {listed}"
                cursor = page.next_cursor

        def newest_first(jobs: list[str], limit: int) -> list[list[str]]:
            jobs = jobs[::-1]
            return [jobs[i : i + limit] for i in range(0, len(jobs), limit)]

        in_order = [job for job in order if job in ids["emails"] or job in others]
        assert await pages(4, queue="emails") == newest_first(in_order, 4)
        assert await pages(3, queue="emails", type="t") == newest_first(ids["emails"], 3)
        assert await pages(3, queue="default") == newest_first(ids["default"], 3)
        pending = [job for job in in_order if job in others or job in ids["emails"][4:]]
        assert await pages(2, queue="emails", state="pending") == newest_first(pending, 2)
        done = ids["emails"][:3]
        assert await pages(2, queue="emails", state="completed") == newest_first(done, 2)
        assert await pages(2, queue="emails", state="active") == [[ids["emails"][3]]]
        assert await pages(2, queue="default", state="active") == [[ids["default"][3]]]
        assert await pages(5, queue="exports", type="u") == [[]]

    async def test_a_page_of_a_queue_is_full_among_thousands_of_another_queues_jobs(
        self, driver_harness: DriverHarness
    ) -> None:
        """A store holding thousands of another queue's jobs between a queue's few still gives
        that queue's full pages (a driver that filters some index pages by queue would answer
        short pages here, with a cursor)."""
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        emails: list[str] = []
        for _ in range(5):
            emails.append(await enqueue(driver, queue="emails"))
            crowd = [new_request(queue="exports") for _ in range(_CROWD)]
            assert None not in await driver.enqueue_many(crowd)
        infos = [await info_of(driver, job_id) for job_id in emails]
        newest = [
            info.id for info in sorted(infos, key=lambda i: (i.created_at, i.id), reverse=True)
        ]
        queue = JobQueue(driver)
        first = await queue.list_jobs(queue="emails", limit=3)
        assert [job.id for job in first.jobs] == newest[:3]
        assert first.next_cursor is not None
        rest = await queue.list_jobs(queue="emails", limit=3, cursor=first.next_cursor)
        assert ([job.id for job in rest.jobs], rest.next_cursor) == (newest[3:], None)

    async def test_queue_stats_count_finished_jobs_per_queue(
        self, driver_harness: DriverHarness
    ) -> None:
        """Every driver counts each queue's completed, failed and cancelled jobs (never None),
        the live ones as ``stats()`` counts them per type: they go down as jobs are requeued,
        deleted, purged, or pruned at the end of their retention."""
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver(retain_completed_ms=60_000)
        if not isinstance(driver, QueueOperations):
            pytest.skip("the driver reports no queues")

        async def settle(name: str, how: str, job_type: str = "t") -> str:
            job_id = await enqueue(driver, job_type, queue=name)
            [held] = await driver.claim(1, LEASE_MS, [job_type], name)
            assert held.id == job_id
            if how == "complete":
                assert await driver.complete(job_id, held.lease_token)
            else:
                assert await driver.fail(job_id, held.lease_token, error="E: boom")
            return job_id

        async def finished() -> dict[str, tuple[int | None, int | None, int | None]]:
            stats = await JobQueue(driver).queue_stats()
            return {name: (row.completed, row.failed, row.cancelled) for name, row in stats.items()}

        for _ in range(2):
            await settle("emails", "complete")
        failed = await settle("emails", "fail")
        cancelled = await enqueue(driver, queue="emails")
        assert await driver.cancel(cancelled)
        await settle("default", "complete")
        await settle("default", "fail")
        await settle("exports", "complete", "other")
        assert await finished() == {
            "emails": (2, 1, 1), "default": (1, 1, 0), "exports": (1, 0, 0),
        }  # fmt: skip
        by_type = await driver.stats()
        assert (by_type["t"].completed, by_type["t"].failed, by_type["t"].cancelled) == (3, 2, 1)

        assert await driver.requeue(failed)
        assert await driver.delete(cancelled)
        assert await driver.purge(["completed"], job_type="other") == 1
        stats = await JobQueue(driver).queue_stats()
        assert (stats["emails"].due, stats["emails"].failed, stats["emails"].cancelled) == (1, 0, 0)
        assert "exports" not in stats  # nothing of it is left

        driver_harness.clock.advance(60_001)  # the completed jobs' retention ends
        await settle("exports", "complete", "other")
        assert await finished() == {
            "emails": (0, 0, 0), "default": (0, 1, 0), "exports": (1, 0, 0),
        }  # fmt: skip

    async def test_queue_stats_count_per_queue(self, driver_harness: DriverHarness) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        if not isinstance(driver, QueueOperations):
            pytest.skip("the driver reports no queues")
        now = driver_harness.clock.now_ms()
        await enqueue(driver, queue="emails")
        await enqueue(driver, queue="emails", run_at_ms=now + 60_000)
        held = await enqueue(driver, queue="emails")
        await enqueue(driver, "other")
        await driver.claim(1, LEASE_MS, ALL, "emails")
        stats = await JobQueue(driver).queue_stats()
        assert set(stats) == {"emails", "default"}
        emails = stats["emails"]
        assert (emails.due, emails.scheduled, emails.active) == (1, 1, 1)
        assert stats["default"].due == 1
        assert held  # the one claimed is one of the two due
        by_type = await driver.stats()  # per type as before
        assert by_type["t"].due + by_type["t"].active + by_type["t"].scheduled == 3

    async def test_the_queue_takes_the_queue_from_the_request_then_handler_then_definition(
        self, driver_harness: DriverHarness
    ) -> None:
        from pydantic import BaseModel

        from jobs.definitions import define_job

        class Empty(BaseModel):
            pass

        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        registry = JobHandlerRegistry()
        registry.register("h", _nothing, queue="handled")
        queue = JobQueue(driver, registry=registry)
        mailing = define_job("t", Empty, queue="emails")
        ids = [
            await queue.enqueue(mailing, {}),
            await queue.enqueue(mailing, {}, queue="urgent"),
            await queue.enqueue("h", {}),
            await queue.enqueue("h", {}, queue="default"),
            await queue.enqueue("plain", {}),
            *await queue.enqueue_many(
                [NewJob(type="plain", queue="batch"), NewJob(type=mailing, payload={})]
            ),
        ]
        queues = [(await info_of(driver, job_id)).queue for job_id in ids if job_id]
        assert queues == ["emails", "urgent", "handled", "default", "default", "batch", "emails"]

    @pytest.mark.parametrize("name", ["", "two words", "a{b}", "x" * 65, 7, None])
    async def test_a_bad_queue_name_is_refused_before_any_write(
        self, driver_harness: DriverHarness, name: Any
    ) -> None:
        driver = await driver_harness.driver()
        queue = JobQueue(driver)
        if name is not None:
            with pytest.raises(JobOptionError, match="queue"):
                await queue.enqueue("t", {}, queue=name)
        with pytest.raises(JobOptionError, match="queue"):
            await queue.enqueue_many([NewJob(type="t"), NewJob(type="t", queue=name or "a b")])
        if getattr(driver_harness, "checks_requests", True):
            with pytest.raises(JobOptionError, match="queue"):
                await driver.enqueue(new_request(queue=name or "a b"))
        assert sum((await driver.counts()).values()) == 0

    async def test_a_driver_without_named_queues_refuses_one_before_any_write(
        self, driver_harness: DriverHarness
    ) -> None:
        if getattr(driver_harness, "named_queues", True) is not False:
            pytest.skip("the driver stores jobs in named queues")
        driver = await driver_harness.driver()
        with pytest.raises(DriverError, match="named queues"):
            await JobQueue(driver).enqueue("t", {}, queue="emails")
        with pytest.raises(DriverError, match="named queues"):
            await driver.enqueue_many([new_request(), new_request(queue="emails")])
        assert sum((await driver.counts()).values()) == 0

    async def test_a_runner_serving_one_queue_leaves_the_others_alone(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        ran: list[str] = []
        runner = _runner(driver, ran, queues="emails")
        mine = [await enqueue(driver, payload={"id": f"e{i}"}, queue="emails") for i in range(3)]
        others = [await enqueue(driver, payload={"id": "x"}, queue="exports")]
        others.append(await enqueue(driver, payload={"id": "d"}))
        runner.start()
        try:
            await wait_until(lambda: _all_completed(driver, mine), message="the emails ran")
        finally:
            await runner.close()
        assert sorted(ran) == ["e0", "e1", "e2"]
        assert await _states(driver, others) == ["pending", "pending"]

    async def test_strict_order_drains_the_first_queue_before_the_next(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        ran: list[str] = []
        runner = _runner(driver, ran, queues="critical,default")
        ids = [await enqueue(driver, payload={"id": f"d{i}"}) for i in range(3)]
        ids += [await enqueue(driver, payload={"id": f"c{i}"}, queue="critical") for i in range(3)]
        runner.start()
        try:
            await wait_until(lambda: _all_completed(driver, ids), message="every job ran")
        finally:
            await runner.close()
        assert sorted(ran[:3]) == ["c0", "c1", "c2"]
        assert sorted(ran[3:]) == ["d0", "d1", "d2"]

    async def test_weights_serve_every_queue(self, driver_harness: DriverHarness) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        ran: list[str] = []
        runner = _runner(driver, ran, queues="a=1,b=1")
        names = [(q, f"{q}{i}") for q in "ab" for i in range(4)]
        ids = [await enqueue(driver, payload={"id": name}, queue=q) for q, name in names]
        runner.start()
        try:
            await wait_until(lambda: _all_completed(driver, ids), message="every job ran")
        finally:
            await runner.close()
        assert sorted(ran) == sorted(f"{q}{i}" for q in "ab" for i in range(4))

    async def test_a_runner_given_no_queues_serves_default_and_its_handlers_queues(
        self, driver_harness: DriverHarness
    ) -> None:
        _needs_named_queues(driver_harness)
        driver = await driver_harness.driver()
        ran: list[str] = []
        registry = JobHandlerRegistry()
        registry.register(ALL[0], _recorder(ran))
        registry.register("mail", _recorder(ran), queue="emails")
        runner = JobRunner(driver, registry, _settings())
        assert runner.queues.names == ("default", "emails")
        ids = [
            await enqueue(driver, payload={"id": "plain"}),
            await enqueue(driver, "mail", payload={"id": "mail"}, queue="emails"),
        ]
        stray = await enqueue(driver, payload={"id": "stray"}, queue="exports")
        runner.start()
        try:
            await wait_until(lambda: _all_completed(driver, ids), message="both ran")
        finally:
            await runner.close()
        assert sorted(ran) == ["mail", "plain"]
        assert await _states(driver, [stray]) == ["pending"]


def _needs_named_queues(harness: DriverHarness) -> None:
    if getattr(harness, "named_queues", True) is False:
        pytest.skip("the driver keeps every job in the default queue")


async def _nothing(payload: Any) -> None:
    return None


def _recorder(ran: list[str]) -> Any:
    async def run(payload: Any) -> None:
        ran.append(payload["id"])
        await asyncio.sleep(0)

    return run


def _settings() -> JobsSettings:
    return JobsSettings(
        concurrency=1, prefetch=0, lease_ms=LEASE_MS, heartbeat_ms=_HEARTBEAT_MS,
        poll_interval_ms=200,
    )  # fmt: skip


def _runner(driver: JobDriver, ran: list[str], *, queues: str) -> JobRunner:
    registry = JobHandlerRegistry()
    registry.register(ALL[0], _recorder(ran))
    return JobRunner(driver, registry, _settings(), queues=queues)


async def _all_completed(driver: JobDriver, ids: list[str]) -> bool:
    return all(state == "completed" for state in await _states(driver, ids))
